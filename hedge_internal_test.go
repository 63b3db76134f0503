package retry

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The Budget counts the call's first copy as a first attempt and every
// other copy, hedge or retry, as a retry: its accounting equals the
// copies the operation saw. The Throttle sees the outcome of every copy
// that was not cancelled.
func TestHedgeBudgetAndThrottleAccounting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := NewBudget(BudgetConfig{Ratio: 1, MinPerSecond: 100})
		if err != nil {
			t.Fatal(err)
		}
		th, err := NewThrottle(ThrottleConfig{})
		if err != nil {
			t.Fatal(err)
		}
		h, err := NewHedger(HedgeConfig{FixedDelay: 10 * time.Millisecond, MaxCopies: 3})
		if err != nil {
			t.Fatal(err)
		}
		var sent atomic.Int64
		errFail := errors.New("test: transient")
		p := Policy{Budget: b, Throttle: th, Initial: Immediate}
		const calls = 20
		for i := range calls {
			err := Hedge(t.Context(), p, h, func(ctx context.Context) error {
				sent.Add(1)
				n := HedgeAttempt(ctx)
				d := map[int]time.Duration{1: time.Second, 2: 50 * time.Millisecond, 3: time.Millisecond}[n]
				if i%2 == 1 {
					d = time.Millisecond // every other call answers before the delay
				}
				select {
				case <-time.After(d):
					if n == 3 && i%4 == 0 {
						return errFail // a fast failure: the next copy goes at once
					}
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		first, retries := b.w.counts()
		if first != calls || first+retries != sent.Load() {
			t.Errorf("budget counted %d first attempts and %d retries; the operation saw %d copies in %d calls", first, retries, sent.Load(), calls)
		}
		requests, _ := th.w.counts()
		if requests == 0 || requests > sent.Load() {
			t.Errorf("throttle counted %d requests of %d copies", requests, sent.Load())
		}
	})
}

// errStatusCancelled is how some clients (grpc-go's codes.Canceled) report
// an operation whose context was cancelled: an error that does not wrap
// the context's.
var errStatusCancelled = errors.New("test: status CANCELLED")

// A loser that its cancellation ends tells the Throttle nothing, whatever
// error it returns: not a context error of its own (grpc-go's CANCELLED
// status wraps none), which the Throttle would count as an accepted
// request.
func TestHedgeCancelledLoserTellsThrottleNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, err := NewThrottle(ThrottleConfig{})
		if err != nil {
			t.Fatal(err)
		}
		h, err := NewHedger(HedgeConfig{FixedDelay: 10 * time.Millisecond, MaxCopies: 2})
		if err != nil {
			t.Fatal(err)
		}
		err = Hedge(t.Context(), Policy{Throttle: th}, h, func(ctx context.Context) error {
			if HedgeAttempt(ctx) == 2 {
				return nil // the hedge wins at once
			}
			<-ctx.Done()
			return errStatusCancelled
		})
		if err != nil {
			t.Fatal(err)
		}
		if requests, accepts := th.w.counts(); requests != 1 || accepts != 1 {
			t.Errorf("throttle counted %d requests, %d accepted; want the winner's alone", requests, accepts)
		}
	})
}
