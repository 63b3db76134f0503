package retryhttp_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

// A Base that breaks the RoundTripper contract with (nil, nil) must give
// an error, not a panic, as http.Client does for its own transport.
func TestBaseReturnsNilNil(t *testing.T) {
	for _, p := range []retry.Policy{{MaxAttempts: 2, Initial: retry.Immediate}, {MaxAttempts: 2, Initial: retry.Immediate, AttemptTimeout: time.Second}} {
		tr := &retryhttp.Transport{Base: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil }), Policy: p}
		req, _ := http.NewRequest("GET", "http://127.0.0.1/x", nil)
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Fatalf("panic: %v", v)
				}
			}()
			resp, err := tr.RoundTrip(req)
			if resp != nil || err == nil {
				t.Fatalf("resp %v, err %v: want an error", resp, err)
			}
		}()
	}
}
