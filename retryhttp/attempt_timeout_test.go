package retryhttp_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

type stallRT struct{}

func (stallRT) RoundTrip(r *http.Request) (*http.Response, error) {
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// retry.Do cuts an attempt with an AttemptTimeout short where
// MaxElapsed ends; the Transport promises its attempt timeout works
// "exactly as in retry.Do".
func TestTransportAttemptClippedByMaxElapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := retry.Policy{MaxElapsed: 2 * time.Second, AttemptTimeout: time.Hour, MaxAttempts: 3}
		tr := &retryhttp.Transport{Base: stallRT{}, Policy: p}
		req, _ := http.NewRequestWithContext(t.Context(), "GET", "http://example.invalid/", nil)
		start := time.Now()
		_, err := tr.RoundTrip(req)
		if took := time.Since(start); took > p.MaxElapsed {
			t.Fatalf("took %v with MaxElapsed %v (err %v)", took, p.MaxElapsed, err)
		}
	})
}
