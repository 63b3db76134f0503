package retryvalkey_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/faultproxy"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retrytest"
	"github.com/retrykit/retry/retryvalkey"
)

// TestPolicyDrivesValkeyLoop: valkey-go's own loop stops at MaxAttempts,
// the waits come from the policy, the Observer sees every attempt, and
// idempotent writes and MarkSafe calls are repeated.
func TestPolicyDrivesValkeyLoop(t *testing.T) {
	srv := redistest.Start(t)
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: only("get")})
	var rec retrytest.Recorder
	p := retry.Policy{Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxAttempts: 3, Observer: &rec}
	c := newClient(t, px.Addr(), p)
	ctx := context.Background()
	err := c.Do(ctx, c.B().Get().Key("k").Build()).Error()
	if !errors.Is(err, retry.ErrMaybeApplied) {
		t.Fatalf("GET with every reply lost: %v; want retry.ErrMaybeApplied", err)
	}
	if pa, r, _ := px.Counts("get"); pa+r != 3 {
		t.Fatalf("proxy saw %d GETs; want 3 (MaxAttempts)", pa+r)
	}
	if rec.Count(retry.EventAttempt) != 3 || rec.Count(retry.EventRetry) != 2 || rec.Count(retry.EventDone) != 1 {
		t.Fatalf("events %s; want 3 attempts, 2 retries, 1 done", &rec)
	}

	var once atomic.Bool
	px.SetConfig(faultproxy.Config{ResetAfter: 1, Match: func(n string) bool {
		return (n == "set" || n == "incr") && once.CompareAndSwap(false, true)
	}})
	if err := c.Do(ctx, c.B().Set().Key("a").Value("1").Build()).Error(); err != nil {
		t.Fatalf("SET (idempotent) after a lost reply: %v", err)
	}
	once.Store(false)
	if err := c.Do(retryvalkey.MarkSafe(ctx), c.B().Incr().Key("n").Build()).Error(); err != nil {
		t.Fatalf("INCR marked safe after a lost reply: %v", err)
	}
	if v, _ := srv.Do("GET", "n"); v != "2" {
		t.Fatalf("n = %q; want 2 (applied, then repeated as the caller allowed)", v)
	}
}

// TestDecorrelatedJitterWaits: every repeat of valkey-go's loop is judged
// by the call's Loop, which knows the previous wait, so DecorrelatedJitter
// is accepted and each wait lies in [Initial, min(MaxDelay, 3 × previous)].
func TestDecorrelatedJitterWaits(t *testing.T) {
	srv := redistest.Start(t)
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: only("get")})
	var rec retrytest.Recorder
	const initial, maxDelay = time.Millisecond, 20 * time.Millisecond
	p := retry.Policy{Initial: initial, MaxDelay: maxDelay, Jitter: retry.DecorrelatedJitter(), MaxAttempts: 6, Observer: &rec}
	c := newClient(t, px.Addr(), p)
	if err := c.Do(context.Background(), c.B().Get().Key("k").Build()).Error(); !errors.Is(err, retry.ErrMaybeApplied) {
		t.Fatalf("GET with every reply lost: %v; want retry.ErrMaybeApplied", err)
	}
	waits := rec.Waits()
	if len(waits) != 5 {
		t.Fatalf("waits %v; want 5 (MaxAttempts 6)", waits)
	}
	prev := initial
	for i, w := range waits {
		if hi := min(maxDelay, 3*prev); w < initial || w > hi {
			t.Fatalf("wait %d = %v outside [%v, %v] (waits %v)", i+1, w, initial, hi, waits)
		}
		prev = w
	}
}

// TestBudgetStopsValkeyLoop: a Budget that grants no retry stops
// valkey-go's own loop after the first attempt.
func TestBudgetStopsValkeyLoop(t *testing.T) {
	srv := redistest.Start(t)
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: only("get")})
	b, err := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	p := testPolicy()
	p.Budget = b
	c := newClient(t, px.Addr(), p)
	if err := c.Do(context.Background(), c.B().Get().Key("k").Build()).Error(); !errors.Is(err, retry.ErrMaybeApplied) {
		t.Fatalf("GET with every reply lost: %v; want retry.ErrMaybeApplied", err)
	}
	if pa, r, _ := px.Counts("get"); pa+r != 1 {
		t.Fatalf("proxy saw %d GETs; want 1 (the budget refused every retry)", pa+r)
	}
}

// The events of valkey-go's loop report MaxAttempts as retry.Do does: the
// default for a policy that leaves it zero.
func TestInnerEventsReportMaxAttemptsAsDo(t *testing.T) {
	srv := redistest.Start(t)
	var once atomic.Bool
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: func(n string) bool {
		return n == "get" && once.CompareAndSwap(false, true)
	}})
	var rec retrytest.Recorder
	p := retry.Policy{Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond, Observer: &rec}
	c := newClient(t, px.Addr(), p)
	if err := c.Do(context.Background(), c.B().Get().Key("k").Build()).Error(); err != nil && !valkey.IsValkeyNil(err) {
		t.Fatal(err)
	}
	got := rec.Events()
	retried := false
	for _, e := range got {
		retried = retried || e.Kind == retry.EventRetry
		if e.MaxAttempts != retry.DefaultMaxAttempts {
			t.Errorf("%v/%d: MaxAttempts %d, want %d", e.Kind, e.Attempt, e.MaxAttempts, retry.DefaultMaxAttempts)
		}
	}
	if !retried {
		t.Fatalf("events %v: valkey-go's loop did not retry the lost reply", got)
	}
}

// TestInnerLoopReason: when valkey-go's own loop stops repeating the
// first send, the call ends for the reason the policy gave, in its error
// and in EventDone, as retry.Do would report it (it was ReasonPermanent
// whatever the reason).
func TestInnerLoopReason(t *testing.T) {
	noRetries, err := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		budget   *retry.Budget
		attempts int // sends the server saw, and the error's Attempts
		want     retry.Reason
	}{
		{"attempts", nil, 3, retry.ReasonAttempts},
		{"budget", noRetries, 1, retry.ReasonBudget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: only("get")})
			var o retrytest.Recorder
			p := retry.Policy{Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxAttempts: 3, Budget: tc.budget, Observer: &o}
			c := newClient(t, px.Addr(), p)
			err := c.Do(context.Background(), c.B().Get().Key("k").Build()).Error()
			if !errors.Is(err, retry.ErrMaybeApplied) {
				t.Fatalf("GET with every reply lost: %v; want retry.ErrMaybeApplied", err)
			}
			// After one send the call returns its failure bare, after more
			// the loop's error.
			var re *retry.Error
			if tc.attempts > 1 && (!errors.As(err, &re) || re.Reason != tc.want || re.Attempts != tc.attempts) {
				t.Fatalf("GET with every reply lost: %v (%T); want a *retry.Error with %v after %d attempts", err, err, tc.want, tc.attempts)
			}
			if pa, r, _ := px.Counts("get"); pa+r != int64(tc.attempts) {
				t.Fatalf("proxy saw %d GETs; want %d", pa+r, tc.attempts)
			}
			if done, _ := o.Done(); o.Count(retry.EventDone) != 1 || done.Reason != tc.want || done.Attempt != tc.attempts {
				t.Fatalf("events %v; want one EventDone, with %v at attempt %d", &o, tc.want, tc.attempts)
			}
		})
	}
}

// TestInnerAndOuterSendsShareMaxAttempts: the repeats valkey-go's loop
// makes of the first send and the client's own resends count in one
// Loop, so that a call makes at most MaxAttempts sends (it could make
// MaxAttempts-1 more).
func TestInnerAndOuterSendsShareMaxAttempts(t *testing.T) {
	srv := redistest.Start(t)
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: only("set")})
	var done atomic.Int64
	p := retry.Policy{Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxAttempts: 4,
		Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			switch {
			case e.Kind == retry.EventAttempt && e.Attempt == 2:
				// From the second send on, the server refuses the SET
				// without running it; valkey-go's loop does not repeat
				// NOREPLICAS, this client does.
				px.SetConfig(faultproxy.Config{})
				if _, err := srv.Do("CONFIG", "SET", "min-replicas-to-write", "1"); err != nil {
					t.Error(err)
				}
			case e.Kind == retry.EventDone:
				done.Store(int64(e.Reason))
			}
		})}
	c := newClient(t, px.Addr(), p)
	err := c.Do(context.Background(), c.B().Set().Key("k").Value("v").Build()).Error()
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 4 || re.Reason != retry.ReasonAttempts || !errors.Is(err, retry.ErrMaybeApplied) {
		t.Fatalf("SET lost, then refused: %v (%T); want a *retry.Error after 4 attempts (ReasonAttempts) matching retry.ErrMaybeApplied", err, err)
	}
	if pa, r, _ := px.Counts("set"); pa+r != 4 {
		t.Fatalf("proxy saw %d SETs; want 4 (MaxAttempts)", pa+r)
	}
	if got := retry.Reason(done.Load()); got != retry.ReasonAttempts {
		t.Fatalf("EventDone reason %v; want %v", got, retry.ReasonAttempts)
	}
}

// TestInnerLoopThrottled: a repeat of the first send that the Throttle
// rejects is not sent, costs its attempt and its wait, and the Loop goes
// on as retry.Do would, up to MaxAttempts (valkey-go's loop used to end
// at the first rejection).
func TestInnerLoopThrottled(t *testing.T) {
	srv := redistest.Start(t)
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: only("get")})
	th, err := retry.NewThrottle(retry.ThrottleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var o retrytest.Recorder
	p := retry.Policy{Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxAttempts: 3, Throttle: th,
		Observer: retry.Observers(retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			if e.Kind == retry.EventAttempt && e.Attempt == 1 {
				th.Override(retry.ThrottleRejectAll)
			}
		}), &o)}
	c := newClient(t, px.Addr(), p)
	err = c.Do(context.Background(), c.B().Get().Key("k").Build()).Error()
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 3 || re.Reason != retry.ReasonAttempts || !errors.Is(err, retry.ErrMaybeApplied) || !errors.Is(err, retry.ErrThrottled) {
		t.Fatalf("GET lost, then throttled: %v (%T); want a *retry.Error after 3 attempts (ReasonAttempts) matching retry.ErrMaybeApplied and retry.ErrThrottled", err, err)
	}
	if pa, r, _ := px.Counts("get"); pa+r != 1 {
		t.Fatalf("proxy saw %d GETs; want 1 (the Throttle rejected the repeats)", pa+r)
	}
	done, _ := o.Done()
	if o.Count(retry.EventThrottled) != 2 || o.Count(retry.EventDone) != 1 || done.Reason != retry.ReasonAttempts || done.Waited <= 0 {
		t.Fatalf("events %v, EventDone %+v; want 2 rejections, one EventDone with %v and the waits counted", &o, done, retry.ReasonAttempts)
	}
}

// TestInnerLoopPipeline: valkey-go's repeats of a pipeline of read-only
// commands are attempts of the DoMulti call's one Loop: each round counts
// once, however many commands lost their replies, and the call ends for
// the policy's reason.
func TestInnerLoopPipeline(t *testing.T) {
	srv := redistest.Start(t)
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: only("get")})
	var o retrytest.Recorder
	p := retry.Policy{Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxAttempts: 3, Observer: &o}
	c := newClient(t, px.Addr(), p)
	for i, r := range c.DoMulti(context.Background(), c.B().Get().Key("a").Build(), c.B().Get().Key("b").Build()) {
		if !errors.Is(r.Error(), retry.ErrMaybeApplied) {
			t.Errorf("GET %d with every reply lost: %v; want retry.ErrMaybeApplied", i, r.Error())
		}
	}
	if o.Attempts() != 3 || o.Count(retry.EventRetry) != 2 || o.Count(retry.EventDone) != 1 || o.Reason() != retry.ReasonAttempts {
		t.Fatalf("events %v; want 3 attempts, 2 retries, one EventDone with %v", &o, retry.ReasonAttempts)
	}
}
