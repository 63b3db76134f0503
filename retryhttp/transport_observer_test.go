package retryhttp_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// The Observer sees what retry.Do's would for the same call, on the
// Transport's fast path (a plain policy: RoundTrip makes the first attempt
// before the loop) and on the loop's own path (a MaxElapsed turns the fast
// path off): the same events, attempts, delays and reasons, in order.
func TestObserverEventsAsDo(t *testing.T) {
	never := func(error) bool { return false }
	ok := retrytest.Reply{Status: 200}
	unavailable := retrytest.Reply{Status: 503}
	for _, tc := range []struct {
		name   string
		p      retry.Policy
		script []retrytest.Reply
	}{
		{"success", retry.Policy{}, []retrytest.Reply{ok}},
		{"an answer not retried", retry.Policy{}, []retrytest.Reply{{Status: 404}}},
		{"503 then success", retry.Policy{Initial: retry.Immediate}, []retrytest.Reply{unavailable, ok}},
		{"503 until the attempts run out", retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}, []retrytest.Reply{unavailable}},
		{"a lost reply then success", retry.Policy{Initial: retry.Immediate}, []retrytest.Reply{{Lost: true}, ok}},
		{"Retryable refuses", retry.Policy{Initial: retry.Immediate, Retryable: never}, []retrytest.Reply{unavailable, ok}},
		{"one attempt", retry.Policy{MaxAttempts: 1}, []retrytest.Reply{unavailable}},
		{"waits", retry.Policy{Initial: time.Second, Jitter: retry.NoJitter(), MaxAttempts: 3}, []retrytest.Reply{unavailable, unavailable, ok}},
	} {
		for _, path := range []string{"fast path", "loop"} {
			t.Run(tc.name+"/"+path, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					p := tc.p
					if path == "loop" {
						p.MaxElapsed = 24 * time.Hour
					}
					do, tr := sideBySide(t, func() retry.Policy { return p }, tc.script...)
					if len(do.events) < 2 {
						t.Fatalf("retry.Do: %v; want at least EventAttempt and EventDone", do)
					}
					if tr.ok != do.ok || tr.attempts != do.attempts || tr.sent != do.sent || tr.reason != do.reason || !slices.Equal(tr.events, do.events) {
						t.Errorf("Transport and retry.Do differ:\nTransport: %v\nretry.Do:  %v", tr, do)
					}
				})
			})
		}
	}
}
