package retryhttp_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

type failRT struct{}

func (failRT) RoundTrip(*http.Request) (*http.Response, error) { return nil, errors.New("boom") }

// Nested Transports, one attempt, a non-retryable transport error: no
// call gave up after retries, so the served 503 should not be marked
// exhausted (a single Transport does not mark it).
func TestNestedPermanentDoesNotMarkExhausted(t *testing.T) {
	p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 4}
	for _, nested := range []bool{false, true} {
		var tr http.RoundTripper = &retryhttp.Transport{Base: failRT{}, Policy: p}
		if nested {
			tr = &retryhttp.Transport{Base: tr, Policy: p}
		}
		var outErr error
		h := retryhttp.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequestWithContext(r.Context(), "GET", "http://example.invalid/", nil)
			_, outErr = tr.RoundTrip(req)
			w.WriteHeader(503)
		}))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		var re *retry.Error
		errors.As(outErr, &re)
		t.Logf("nested=%v reason=%v header=%q", nested, re.Reason, rec.Header().Get(retryhttp.HeaderExhausted))
		if rec.Header().Get(retryhttp.HeaderExhausted) != "" {
			t.Errorf("nested=%v: 503 marked %s after a single non-retryable attempt (%v)", nested, retryhttp.HeaderExhausted, outErr)
		}
	}
}
