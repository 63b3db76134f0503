package retryhttp_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

// A handler behind Middleware cancels its outgoing call (errgroup-style: a
// sibling call failed, or the client went away) after the call retried once
// and its last attempt ended in a transport timeout (http.Transport's
// ResponseHeaderTimeout, whose error matches context.DeadlineExceeded through
// its Is method). The call was cancelled, not ended by its deadline: the
// service's failing answer must not carry Retry-Exhausted. The deadline rule
// must look at the context's error (the *retry.Error's Cause), not at the
// last attempt's error.
func TestMiddlewareCancelledCallAfterTimeoutAttemptNotMarked(t *testing.T) {
	down, sent := unavailableThenHang(t)
	base := &http.Transport{ResponseHeaderTimeout: 50 * time.Millisecond}
	defer base.CloseIdleConnections()
	var callErr atomic.Value
	resp := getThroughMiddleware(t, func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		out := &http.Client{Transport: &retryhttp.Transport{Base: base, Policy: retry.Policy{
			Initial: time.Millisecond, MaxAttempts: 5, Jitter: retry.NoJitter(),
			Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
				if e.Kind == retry.EventRetry && e.Attempt == 2 {
					cancel() // a sibling failed: the handler gives up its call
				}
			}),
		}}}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, down.URL, nil)
		resp, err := out.Do(req)
		if err != nil {
			callErr.Store(err)
			w.WriteHeader(http.StatusBadGateway) // the sibling's failure
			return
		}
		resp.Body.Close()
	})
	if sent.Load() != 2 || resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("%d sends, status %d (call error %v); want 2 sends and 502", sent.Load(), resp.StatusCode, callErr.Load())
	}
	if retryhttp.Exhausted(resp) {
		t.Fatalf("a call cancelled by its handler (%v) marked the service's 502 %s: callers above will not retry it",
			callErr.Load(), retryhttp.HeaderExhausted)
	}
}
