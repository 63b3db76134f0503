package retry_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/retrytest"
)

const (
	att  = retry.EventAttempt
	rtr  = retry.EventRetry
	thr  = retry.EventThrottled
	ref  = retry.EventBudgetRefused
	done = retry.EventDone
)

func TestObserverSuccessAtFirstAttempt(t *testing.T) {
	var r retrytest.Recorder
	for _, p := range []retry.Policy{
		{Observer: &r},
		{Observer: &r, AttemptTimeout: time.Hour},
		{Observer: &r, MaxElapsed: time.Hour},
	} {
		r.Reset()
		if err := retry.Do(t.Context(), p, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if got, want := r.Kinds(), []retry.EventKind{att, done}; !slices.Equal(got, want) {
			t.Fatalf("%+v: kinds %v, want %v", p, got, want)
		}
		if e := r.Events()[1]; e.Attempt != 1 || e.Err != nil || e.Reason != 0 || e.Waited != 0 || e.MaxAttempts != retry.DefaultMaxAttempts {
			t.Errorf("done event %+v", e)
		}
	}
	// DoValue reports the same events.
	r.Reset()
	v, err := retry.DoValue(t.Context(), retry.Policy{Observer: &r}, func(context.Context) (int, error) { return 7, nil })
	if v != 7 || err != nil || !slices.Equal(r.Kinds(), []retry.EventKind{att, done}) {
		t.Fatalf("DoValue: %d, %v, kinds %v", v, err, r.Kinds())
	}
}

func TestObserverRetriesAndGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r retrytest.Recorder
		p := retry.Policy{Observer: &r, Jitter: retry.NoJitter(), MaxAttempts: 3}
		err := retry.Do(t.Context(), p, func(context.Context) error { return errTransient })
		want := []retry.EventKind{att, rtr, att, rtr, att, done}
		if !slices.Equal(r.Kinds(), want) {
			t.Fatalf("kinds %v, want %v", r.Kinds(), want)
		}
		for i, n := range []int{1, 1, 2, 2, 3, 3} {
			if r.Events()[i].Attempt != n {
				t.Errorf("event %d (%v) attempt %d, want %d", i, r.Events()[i].Kind, r.Events()[i].Attempt, n)
			}
		}
		d := r.Events()[5]
		if d.Err != err || d.Reason != retry.ReasonAttempts || d.Waited != 3*time.Second || d.Elapsed != 3*time.Second {
			t.Errorf("done event %+v (err %v)", d, err)
		}
		if e := r.Events()[3]; e.Delay != 2*time.Second || e.Waited != time.Second || !errors.Is(e.Err, errTransient) {
			t.Errorf("second retry event %+v", e)
		}

		// Success after a retry: EventDone with no error and the total wait.
		r.Reset()
		calls := 0
		retry.Do(t.Context(), p, func(context.Context) error {
			if calls++; calls < 3 {
				return errTransient
			}
			return nil
		})
		if !slices.Equal(r.Kinds(), want) {
			t.Fatalf("kinds %v, want %v", r.Kinds(), want)
		}
		if d := r.Events()[5]; d.Err != nil || d.Reason != 0 || d.Attempt != 3 || d.Waited != 3*time.Second {
			t.Errorf("done event %+v", d)
		}
	})
}

func TestObserverThrottleAndBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A budget with no floor and no ratio refuses every retry.
		b, err := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: -1})
		if err != nil {
			t.Fatal(err)
		}
		var r retrytest.Recorder
		p := retry.Policy{Observer: &r, Initial: retry.Immediate, Budget: b}
		err = retry.Do(t.Context(), p, func(context.Context) error { return errTransient })
		if want := []retry.EventKind{att, ref, done}; !slices.Equal(r.Kinds(), want) {
			t.Fatalf("kinds %v, want %v", r.Kinds(), want)
		}
		if d := r.Events()[2]; d.Reason != retry.ReasonBudget || !errors.Is(d.Err, retry.ErrBudgetRefused) || !errors.Is(err, retry.ErrBudgetRefused) {
			t.Errorf("done event %+v", d)
		}

		// A throttle that has seen only rejections rejects most attempts
		// locally: each rejection is an EventThrottled, not an EventAttempt.
		th, _ := retry.NewThrottle(retry.ThrottleConfig{K: 1, MaxProbability: 1})
		for range 1000 {
			if account.Allow(th) {
				account.Record(th, false)
			}
		}
		r.Reset()
		sent := 0
		p = retry.Policy{Observer: &r, Initial: retry.Immediate, Throttle: th, MaxAttempts: 50}
		retry.Do(t.Context(), p, func(context.Context) error { sent++; return errTransient })
		counts := map[retry.EventKind]int{}
		for _, e := range r.Events() {
			counts[e.Kind]++
			if e.Kind == thr && !errors.Is(e.Err, retry.ErrThrottled) {
				t.Errorf("throttled event %+v", e)
			}
		}
		if counts[att] != sent || counts[thr] != 50-sent || counts[rtr] != 49 || counts[done] != 1 || counts[thr] == 0 {
			t.Errorf("sent %d, event counts %v", sent, counts)
		}
	})
}

func TestObserverContextDoneBeforeFirstAttempt(t *testing.T) {
	var r retrytest.Recorder
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := retry.Do(ctx, retry.Policy{Observer: &r}, func(context.Context) error { return nil })
	if want := []retry.EventKind{done}; !slices.Equal(r.Kinds(), want) || r.Events()[0].Reason != retry.ReasonContext || r.Events()[0].Attempt != 0 {
		t.Fatalf("kinds %v (%+v), err %v", r.Kinds(), r.Events(), err)
	}
}

func TestObserversFanOut(t *testing.T) {
	if retry.Observers() != nil || retry.Observers(nil, nil) != nil {
		t.Fatal("Observers of nothing is not nil")
	}
	var a, b retrytest.Recorder
	if o := retry.Observers(nil, &a); o != retry.Observer(&a) {
		t.Fatal("Observers of one is not that one")
	}
	retry.Do(t.Context(), retry.Policy{Observer: retry.Observers(&a, nil, &b)}, func(context.Context) error { return nil })
	if !slices.Equal(a.Kinds(), []retry.EventKind{att, done}) || !slices.Equal(b.Kinds(), a.Kinds()) {
		t.Fatalf("a %v, b %v", a.Kinds(), b.Kinds())
	}
}

// Observers of two or more has Unwrap() []Observer, which returns them in
// order without the nils, as errors.Join's error has Unwrap() []error.
func TestObserversUnwrap(t *testing.T) {
	var a, b retrytest.Recorder
	o, ok := retry.Observers(&a, nil, &b).(interface{ Unwrap() []retry.Observer })
	if !ok {
		t.Fatal("Observers(a, nil, b) has no Unwrap() []Observer")
	}
	if got := o.Unwrap(); len(got) != 2 || got[0] != retry.Observer(&a) || got[1] != retry.Observer(&b) {
		t.Errorf("Unwrap() = %v, want [a b]", got)
	}
}

// The attempt's context is cancelled even when the operation panics, so
// it does not stay registered on the caller's context.
func TestAttemptContextCancelledOnPanic(t *testing.T) {
	var actx context.Context
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		retry.Do(t.Context(), retry.Policy{AttemptTimeout: time.Hour}, func(ctx context.Context) error {
			actx = ctx
			panic("boom")
		})
	}()
	if actx.Err() != context.Canceled {
		t.Fatalf("attempt context after the panic: %v, want context.Canceled", actx.Err())
	}
}

// With an observer that does nothing, the success path still allocates
// nothing.
func TestObserverSuccessAllocatesNothing(t *testing.T) {
	obs := retry.ObserverFunc(func(context.Context, retry.Event) {})
	p := retry.Policy{Observer: obs}
	op := func(context.Context) error { return nil }
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { retry.Do(ctx, p, op) }); n != 0 {
		t.Fatalf("%v allocs per successful Do with an Observer", n)
	}
}

func TestEventKindString(t *testing.T) {
	for k, want := range map[retry.EventKind]string{att: "attempt", rtr: "retry", thr: "throttled", ref: "budget_refused", done: "done", 0: "EventKind(0)", 99: "EventKind(99)"} {
		if k.String() != want {
			t.Errorf("%d: %q, want %q", k, k.String(), want)
		}
	}
}

// A wait cut short by the caller's context counts in EventDone.Waited for
// as long as it lasted.
func TestWaitedCountsAWaitCutShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec retrytest.Recorder
		p := retry.Policy{Initial: 10 * time.Millisecond, Jitter: retry.NoJitter(), MaxAttempts: 5, Observer: &rec}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		time.AfterFunc(25*time.Millisecond, cancel) // during the second wait (10 ms, then 20 ms)
		err := retry.Do(ctx, p, func(context.Context) error { return errors.New("flaky") })
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonContext || re.Attempts != 2 {
			t.Fatalf("err %v", err)
		}
		if done, _ := rec.Done(); done.Waited != 25*time.Millisecond {
			t.Fatalf("EventDone.Waited = %v; the call waited 10 ms, then 15 ms of 20", done.Waited)
		}
	})
}

// The time an Observer takes is not waiting: it takes 8 ms on EventRetry,
// then the context ends 1 ms into the 10 ms wait, so Waited is 1 ms.
func TestWaitedLeavesOutTheObserversTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var done retry.Event
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		p := retry.Policy{Initial: 10 * time.Millisecond, Jitter: retry.NoJitter(), MaxAttempts: 5,
			Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
				switch e.Kind {
				case retry.EventRetry:
					time.Sleep(8 * time.Millisecond)
					time.AfterFunc(time.Millisecond, cancel)
				case retry.EventDone:
					done = e
				}
			})}
		retry.Do(ctx, p, func(context.Context) error { return errors.New("flaky") })
		if done.Waited != time.Millisecond {
			t.Fatalf("EventDone.Waited = %v; the call waited 1 ms", done.Waited)
		}
	})
}

// Every event's Waited is the sum of the waits before it: an attempt's,
// sent or throttled, counts the waits before that attempt, and so do the
// attempt's EventRetry (its Delay not included); EventDone counts them all.
// With and without an AttemptTimeout (which reports EventAttempt from its
// own path).
func TestWaitedOnEveryEvent(t *testing.T) {
	for _, timeout := range []time.Duration{0, time.Minute} {
		synctest.Test(t, func(t *testing.T) {
			th, _ := retry.NewThrottle(retry.ThrottleConfig{})
			var r retrytest.Recorder
			p := retry.Policy{Initial: time.Second, Jitter: retry.NoJitter(), MaxAttempts: 4, Throttle: th,
				AttemptTimeout: timeout, Observer: &r}
			calls := 0
			retry.Do(t.Context(), p, func(context.Context) error {
				if calls++; calls == 2 {
					th.Override(retry.ThrottleRejectAll) // from now on every attempt is rejected locally
				}
				return errTransient
			})
			// waits 1 s, 2 s, 4 s before attempts 2, 3, 4; attempts 3 and 4 throttled.
			want := []struct {
				kind   retry.EventKind
				waited time.Duration
			}{
				{att, 0}, {rtr, 0}, {att, time.Second}, {rtr, time.Second},
				{thr, 3 * time.Second}, {rtr, 3 * time.Second}, {thr, 7 * time.Second}, {done, 7 * time.Second},
			}
			if len(r.Events()) != len(want) {
				t.Fatalf("AttemptTimeout %v: kinds %v, want %d events", timeout, r.Kinds(), len(want))
			}
			for i, w := range want {
				if e := r.Events()[i]; e.Kind != w.kind || e.Waited != w.waited {
					t.Errorf("AttemptTimeout %v: event %d: %v with Waited %v, want %v with %v", timeout, i, e.Kind, e.Waited, w.kind, w.waited)
				}
			}
		})
	}
}
