package retryvalkey_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retrytest"
)

// TestReceive: a subscription runs on a Loop of the policy. When the server
// drops the subscribed connection (CLIENT KILL), valkey-go's loop
// subscribes again as the Loop says: once, and the subscription goes on
// and ends cleanly; every time, until MaxAttempts; or not at all when the
// Budget refuses, or the Throttle rejects every repeat (each an attempt).
func TestReceive(t *testing.T) {
	noRetries, err := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		kills    int // connections dropped, 0: every one
		budget   *retry.Budget
		throttle bool         // the Throttle rejects every repeat
		attempts int          // the call's attempts, rejected ones included
		sent     int          // EventAttempt events
		reason   retry.Reason // 0: unsubscribed, Receive returns nil
	}{
		{name: "recovers", kills: 1, attempts: 2, sent: 2},
		{name: "attempts", attempts: 3, sent: 3, reason: retry.ReasonAttempts},
		{name: "budget", kills: 1, budget: noRetries, attempts: 1, sent: 1, reason: retry.ReasonBudget},
		{name: "throttle", kills: 1, throttle: true, attempts: 3, sent: 1, reason: retry.ReasonAttempts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			th, err := retry.NewThrottle(retry.ThrottleConfig{})
			if err != nil {
				t.Fatal(err)
			}
			var rec retrytest.Recorder
			c := newClient(t, srv.Addr(), retry.Policy{Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxAttempts: 3, Budget: tc.budget, Throttle: th,
				Observer: retry.Observers(retry.ObserverFunc(func(_ context.Context, e retry.Event) {
					if e.Kind == retry.EventAttempt && tc.throttle {
						th.Override(retry.ThrottleRejectAll)
					}
				}), &rec)})
			ctx, cancel := context.WithTimeout(retrytest.WithCall(context.Background(), "sub"), 10*time.Second)
			defer cancel()
			got := make(chan string, 1)
			done := make(chan error, 1)
			go func() {
				done <- c.Receive(ctx, c.B().Subscribe().Channel("ch").Build(), func(m valkey.PubSubMessage) {
					select {
					case got <- m.Message:
					default:
					}
				})
			}()
			// subscribed waits until the server has a subscriber on ch, or
			// Receive returned.
			subscribed := func() bool {
				for {
					if n, err := srv.Do("PUBLISH", "ch", "m"); err != nil {
						t.Fatal(err)
					} else if n == "1" {
						return true
					}
					select {
					case err := <-done:
						done <- err
						return false
					case <-ctx.Done():
						t.Fatal("no subscriber after 10 s")
					case <-time.After(2 * time.Millisecond):
					}
				}
			}
			for kills := 0; (tc.kills == 0 || kills < tc.kills) && subscribed(); kills++ {
				if _, err := srv.Do("CLIENT", "KILL", "TYPE", "pubsub"); err != nil {
					t.Fatal(err)
				}
			}
			if tc.reason == 0 {
				if !subscribed() {
					t.Fatalf("Receive returned %v; want it subscribed again", <-done)
				}
				<-got
				if err := c.Do(context.Background(), c.B().Unsubscribe().Channel("ch").Build()).Error(); err != nil {
					t.Fatal(err)
				}
			}
			err = <-done
			var re *retry.Error
			switch {
			case tc.reason == 0 && err != nil:
				t.Fatalf("Receive after an unsubscribe: %v; want nil", err)
			case tc.reason != 0 && tc.attempts > 1 && (!errors.As(err, &re) || re.Reason != tc.reason || re.Attempts != tc.attempts):
				t.Fatalf("Receive: %v (%T); want a *retry.Error with %v after %d attempts", err, err, tc.reason, tc.attempts)
			case tc.reason != 0 && err == nil:
				t.Fatal("Receive returned nil; want the dropped connection's error")
			}
			call := rec.Call("sub")
			end, ok := call.Done()
			if !ok || call.Attempts() != tc.sent || call.Count(retry.EventRetry) != tc.attempts-1 || end.Reason != tc.reason || end.Attempt != tc.attempts {
				t.Fatalf("events %v; want the subscription's call of %d attempts (%d sent), %d retries, ending with reason %v", &rec, tc.attempts, tc.sent, tc.attempts-1, tc.reason)
			}
			if tc.throttle && call.Count(retry.EventThrottled) != 2 {
				t.Errorf("events %v; want the Throttle to reject the 2 repeats", &rec)
			}
		})
	}
}
