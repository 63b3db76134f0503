package retry_test

// Stop rules at their edges: no attempt once the context ended as a wait
// ended; MaxElapsed is the total time budget.

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
)

// Do: "Cancelling ctx ends a wait at once." When the context was cancelled
// at the instant the wait ended, the loop made the next attempt with the
// dead context about half of the time (the select had already taken the
// timer), reporting an EventAttempt and calling op after the cancel had
// returned; a zero wait checks the context first, a non-zero one did not.
func TestNoAttemptAfterCancelAtWaitEnd(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // the loop's check and op run back to back
	late := 0
	for range 64 {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			p := retry.Policy{Initial: time.Second, Jitter: retry.NoJitter(), MaxAttempts: 2,
				Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
					if e.Kind == retry.EventRetry {
						go func() { time.Sleep(e.Delay); cancel() }()
					}
				})}
			err := retry.Do(ctx, p, func(ctx context.Context) error {
				if ctx.Err() != nil {
					late++
				}
				return errors.New("x")
			})
			var re *retry.Error
			if !errors.As(err, &re) {
				t.Fatalf("err %v", err)
			}
		})
	}
	if late > 0 {
		t.Fatalf("%d of 64 calls made an attempt with a context cancelled when the wait ended", late)
	}
}

// Policy.MaxElapsed: "the total time budget of one Do call, measured from
// its start"; README: "at most 5 attempts, 30 s in all". (1) A wait that
// ends exactly at MaxElapsed is taken and an attempt is then started with
// no budget left (unlike the deadline rule, which refuses a wait ending
// exactly at the deadline because it "would leave the attempt no time at
// all"). (2) Attempts are not bounded by what is left of MaxElapsed, so
// an AttemptTimeout larger than MaxElapsed runs the call far past it.
func TestMaxElapsedIsTheTotalBudget(t *testing.T) {
	t.Run("no attempt starts at MaxElapsed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			var late []time.Duration
			p := retry.Policy{Initial: time.Second, Jitter: retry.NoJitter(), MaxAttempts: 10, MaxElapsed: 3 * time.Second}
			err := retry.Do(t.Context(), p, func(ctx context.Context) error {
				if at := time.Since(start); at >= p.MaxElapsed {
					late = append(late, at)
				}
				return errors.New("x")
			})
			if len(late) > 0 {
				t.Fatalf("attempts started at %v, with MaxElapsed %v used up (err %v)", late, p.MaxElapsed, err)
			}
		})
	})
	t.Run("attempt bounded by MaxElapsed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			p := retry.Policy{MaxElapsed: 2 * time.Second, AttemptTimeout: time.Hour, MaxAttempts: 3}
			err := retry.Do(t.Context(), p, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
			if took := time.Since(start); took > p.MaxElapsed {
				t.Fatalf("Do with MaxElapsed %v took %v (err %v)", p.MaxElapsed, took, err)
			}
		})
	})
}
