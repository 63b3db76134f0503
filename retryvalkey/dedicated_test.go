package retryvalkey_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/faultproxy"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retrytest"
)

// failure is a way of making a command fail at a real server, and of
// counting the sends of it that the server (through the proxy) saw.
type failure struct {
	name string // the command failed, as the proxy counts it
	// set makes the command fail from now on (on) or succeed.
	set func(t *testing.T, srv *redistest.Server, px *faultproxy.Proxy, on bool)
}

// lostGET loses every GET's reply after the server ran it: valkey-go's
// loop repeats a GET through RetryDelay.
var lostGET = failure{"get", func(t *testing.T, _ *redistest.Server, px *faultproxy.Proxy, on bool) {
	cfg := faultproxy.Config{}
	if on {
		cfg = faultproxy.Config{ResetAfter: 1, Match: only("get")}
	}
	if err := px.SetConfig(cfg); err != nil {
		t.Error(err)
	}
}}

// refusedSET has the server refuse every SET without running it
// (NOREPLICAS): valkey-go's loop does not repeat it, the client's own
// resends do.
var refusedSET = failure{"set", func(t *testing.T, srv *redistest.Server, _ *faultproxy.Proxy, on bool) {
	v := "0"
	if on {
		v = "1"
	}
	if _, err := srv.Do("CONFIG", "SET", "min-replicas-to-write", v); err != nil {
		t.Error(err)
	}
}}

// checkLoop checks that send, a call of one of the client's methods that
// sends f's command (and returns its first error), runs on one retry.Loop
// of the policy: a command that fails, then succeeds, is retried; the
// Observer sees the Loop's EventAttempt, EventRetry and EventDone, with
// the policy's reason when the call gives up; the Budget and the Throttle
// are asked before every repeat.
func checkLoop(t *testing.T, f failure, send func(ctx context.Context, c valkey.Client) error) {
	t.Helper()
	noRetries, err := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		recovers bool // the command succeeds from the second send on
		budget   *retry.Budget
		throttle bool         // the Throttle rejects every repeat
		sends    int64        // the sends the server sees
		attempts int          // EventAttempt events
		retries  int          // EventRetry events
		reason   retry.Reason // of EventDone; 0: the call succeeds
	}{
		{name: "recovers", recovers: true, sends: 2, attempts: 2, retries: 1},
		{name: "attempts", sends: 3, attempts: 3, retries: 2, reason: retry.ReasonAttempts},
		{name: "budget", budget: noRetries, sends: 1, attempts: 1, reason: retry.ReasonBudget},
		// The two repeats are rejected: each counts as an attempt.
		{name: "throttle", throttle: true, sends: 1, attempts: 1, retries: 2, reason: retry.ReasonAttempts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{})
			f.set(t, srv, px, true)
			th, err := retry.NewThrottle(retry.ThrottleConfig{})
			if err != nil {
				t.Fatal(err)
			}
			var rec retrytest.Recorder
			p := retry.Policy{Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxAttempts: 3, Budget: tc.budget, Throttle: th,
				Observer: retry.Observers(retry.ObserverFunc(func(_ context.Context, e retry.Event) {
					if e.Kind == retry.EventRetry && tc.recovers {
						f.set(t, srv, px, false)
					}
					if e.Kind == retry.EventAttempt && tc.throttle {
						th.Override(retry.ThrottleRejectAll)
					}
				}), &rec)}
			c := newClient(t, px.Addr(), p)
			err = send(retrytest.WithCall(context.Background(), "call"), c)
			if (err == nil) != (tc.reason == 0) {
				t.Fatalf("error %v; want one only when the call gives up (%v)", err, tc.reason)
			}
			if pa, r, _ := px.Counts(f.name); pa+r != tc.sends {
				t.Errorf("the server saw %d sends of %s; want %d", pa+r, f.name, tc.sends)
			}
			call := rec.Call("call")
			done, ok := call.Done()
			if !ok || len(rec.Calls()) != 1 || call.Attempts() != tc.attempts || call.Count(retry.EventRetry) != tc.retries || done.Reason != tc.reason {
				t.Fatalf("events %v; want one call of %d attempts, %d retries, ending with reason %v", &rec, tc.attempts, tc.retries, tc.reason)
			}
			if tc.budget != nil && call.Count(retry.EventBudgetRefused) != 1 {
				t.Errorf("events %v; want the Budget to refuse the first repeat", &rec)
			}
			if tc.throttle && call.Count(retry.EventThrottled) != 2 {
				t.Errorf("events %v; want the Throttle to reject the 2 repeats", &rec)
			}
		})
	}
}

// A dedicated client's Do and DoMulti run on a Loop of the policy, as the
// client's own (it used to be left to a rule applied to each repeat).
func TestDedicated(t *testing.T) {
	t.Run("Do", func(t *testing.T) {
		checkLoop(t, refusedSET, func(ctx context.Context, c valkey.Client) error {
			return c.Dedicated(func(d valkey.DedicatedClient) error {
				return d.Do(ctx, d.B().Set().Key("k").Value("v").Build()).Error()
			})
		})
	})
	t.Run("DoMulti", func(t *testing.T) {
		checkLoop(t, refusedSET, func(ctx context.Context, c valkey.Client) error {
			return c.Dedicated(func(d valkey.DedicatedClient) error {
				return d.DoMulti(ctx, d.B().Set().Key("k").Value("v").Build())[0].Error()
			})
		})
	})
}

// Dedicate's client is wrapped as Dedicated's.
func TestDedicate(t *testing.T) {
	checkLoop(t, refusedSET, func(ctx context.Context, c valkey.Client) error {
		d, release := c.Dedicate()
		defer release()
		return d.Do(ctx, d.B().Set().Key("k").Value("v").Build()).Error()
	})
}

// The clients of Nodes are wrapped as the client is: valkey-go's loop
// repeats a GET whose reply was lost as the call's Loop says.
func TestNodes(t *testing.T) {
	checkLoop(t, lostGET, func(ctx context.Context, c valkey.Client) error {
		for _, n := range c.Nodes() {
			if err := n.Do(ctx, n.B().Get().Key("k").Build()).Error(); !valkey.IsValkeyNil(err) {
				return err
			}
		}
		return nil
	})
}

// The errors of the dedicated client's calls are the client's: a lost
// reply on a dedicated connection is not repeated (valkey-go does not
// reuse a dedicated connection that failed) and says so.
func TestDedicatedLostReply(t *testing.T) {
	srv := redistest.Start(t)
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{})
	lostGET.set(t, srv, px, true)
	var rec retrytest.Recorder
	c := newClient(t, px.Addr(), retry.Policy{Initial: time.Millisecond, MaxAttempts: 3, Observer: &rec})
	err := c.Dedicated(func(d valkey.DedicatedClient) error {
		return d.Do(context.Background(), d.B().Get().Key("k").Build()).Error()
	})
	if !errors.Is(err, retry.ErrMaybeApplied) {
		t.Fatalf("GET lost on a dedicated connection: %v; want retry.ErrMaybeApplied", err)
	}
	if done, ok := rec.Done(); !ok || rec.Attempts() != 1 || done.Reason != retry.ReasonPermanent {
		t.Fatalf("events %v; want one attempt, ending with %v", &rec, retry.ReasonPermanent)
	}
}
