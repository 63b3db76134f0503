package retry_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// rejectAfterFirst returns a Throttle that lets attempts through until
// reject is called, and then rejects every one.
func rejectAfterFirst(t *testing.T) (th *retry.Throttle, reject func()) {
	t.Helper()
	th, err := retry.NewThrottle(retry.ThrottleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return th, func() { th.Override(retry.ThrottleRejectAll) }
}

// TestLoopClientWaitsRejected: a client whose own loop waits (gax) asks
// Begin for the retry before its wait; while the Throttle rejects, it goes
// from Failed to Begin with no time passing, adding up the waits that it
// then sleeps at once. Failed judges each wait from the end of those not
// yet slept: the sum never reaches past MaxElapsed, a deadline or Until,
// and the call ends after the attempts, with the reason and the waits, of
// Do, which sleeps each wait in turn.
func TestLoopClientWaitsRejected(t *testing.T) {
	base := retry.Policy{Initial: time.Second, MaxDelay: 2 * time.Second, Jitter: retry.NoJitter(), MaxAttempts: retry.Unlimited}
	for _, tc := range []struct {
		name   string
		budget time.Duration // MaxElapsed
		dl     time.Duration // the context's deadline, from the start
		until  time.Duration // Loop.Until, from the start (no Do reference)
		want   retry.Reason
	}{
		{name: "MaxElapsed", budget: 5 * time.Second, want: retry.ReasonTimeBudget},
		{name: "deadline", dl: 5 * time.Second, want: retry.ReasonDeadline},
		{name: "Until", until: 5 * time.Second, want: retry.ReasonTimeBudget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := base
				p.MaxElapsed = tc.budget
				call := func() context.Context { // a call's context, its deadline from now
					if tc.dl == 0 {
						return t.Context()
					}
					ctx, cancel := context.WithTimeout(t.Context(), tc.dl)
					t.Cleanup(cancel)
					return ctx
				}

				// The reference, for the rows that Do can express: the
				// first attempt is let through, the retries rejected.
				refAttempts, refWaited := 3, 3*time.Second // waits 1 s, 2 s; the next 2 s would end at 5 s
				if tc.until == 0 {
					var ref retrytest.Recorder
					q := p
					th, reject := rejectAfterFirst(t)
					q.Throttle, q.Observer = th, &ref
					start := time.Now()
					err := retry.Do(call(), q, func(context.Context) error {
						reject()
						return errTransient
					})
					var re *retry.Error
					if !errors.As(err, &re) || re.Reason != tc.want {
						t.Fatalf("Do = %v, want reason %v", err, tc.want)
					}
					done, _ := ref.Done()
					refAttempts, refWaited = re.Attempts, done.Waited
					if took := time.Since(start); took != refWaited {
						t.Fatalf("Do took %v, waited %v", took, refWaited)
					}
				}

				var log retrytest.Recorder
				th, reject := rejectAfterFirst(t)
				p.Throttle, p.Observer = th, &log
				start := time.Now()
				ctx := call()
				l := p.Loop()
				if tc.until > 0 {
					l.Until(start.Add(tc.until))
				}
				if _, err := l.Begin(ctx); err != nil {
					t.Fatal(err)
				}
				reject()
				d, stop := l.Failed(ctx, errTransient)
				owed := d
				for i := 0; stop == nil; i++ {
					if i == 100 {
						t.Fatalf("the Throttle rejected 100 retries and the loop goes on, with %v of waits granted and no time passed", owed)
					}
					if _, err := l.Begin(ctx); !errors.Is(err, retry.ErrThrottled) {
						t.Fatalf("Begin = %v, want ErrThrottled", err)
					}
					d, stop = l.Failed(ctx, retry.ErrThrottled)
					owed += d
				}
				if time.Since(start) != 0 {
					t.Fatal("time passed in the loop") // synctest: only the waits take time
				}
				var re *retry.Error
				if !errors.As(stop, &re) || re.Reason != tc.want {
					t.Fatalf("stop = %v, want reason %v", stop, tc.want)
				}
				done, _ := log.Done()
				if re.Attempts != refAttempts || owed != refWaited || done.Waited != refWaited {
					t.Errorf("%v; Loop: %d attempts, %v of waits granted (EventDone's Waited %v); Do: %d attempts, %v waited",
						stop, re.Attempts, owed, done.Waited, refAttempts, refWaited)
				}
				if limit := 5 * time.Second; owed >= limit {
					t.Errorf("waits granted add up to %v, past the limit %v", owed, limit)
				}
			})
		})
	}
}

// TestLoopWaitedNotJudgedTwice: a client that waits each granted wait
// (Wait, or its own sleep, before Begin) is judged from the clock alone,
// as Do is: a wait that it has slept is not counted again.
func TestLoopWaitedNotJudgedTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := retry.Policy{Initial: time.Second, MaxDelay: time.Second, Jitter: retry.NoJitter(), MaxAttempts: retry.Unlimited, MaxElapsed: 4 * time.Second}
		ctx := t.Context()
		l := p.Loop()
		n := 0
		for {
			l.Begin(ctx)
			n++
			time.Sleep(500 * time.Millisecond) // the attempt takes time
			d, stop := l.Failed(ctx, errTransient)
			if stop != nil {
				break
			}
			if n%2 == 0 {
				time.Sleep(d) // the client's own wait
			} else if err := l.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// Attempts end at 0.5, 2, 3.5 s; a 1 s wait from 3.5 s ends at
		// 4.5 s, past MaxElapsed.
		if n != 3 {
			t.Errorf("%d attempts, want 3", n)
		}
	})
}
