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
