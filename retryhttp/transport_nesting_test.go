package retryhttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

// An enclosing retry.Do with an AttemptTimeout retries a call whose only
// attempt through the Transport hung until that timeout: the Transport made
// one attempt and never retried, so its *retry.Error (ReasonContext, 1
// attempt) must not end the outer loop as an exhausted inner loop would.
func TestOuterAttemptTimeoutRetriesHungTransportCall(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			<-r.Context().Done() // the first request hangs
			return
		}
	}))
	defer srv.Close()
	client := &http.Client{Transport: &retryhttp.Transport{}}
	outer := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3, AttemptTimeout: 200 * time.Millisecond}
	err := retry.Do(context.Background(), outer, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	if err != nil || n.Load() != 2 {
		t.Fatalf("err %v after %d requests; want the hung request retried by the outer loop", err, n.Load())
	}
}
