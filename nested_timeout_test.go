package retry_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
)

// Policy.AttemptTimeout: "An attempt that runs out of it is retried while
// the caller's context is alive". Since the nesting rule moved before the
// attempt-timeout rule, an inner loop (a nested Do, a retryhttp Transport, …)
// whose only attempt hung until the outer AttemptTimeout cut it short
// returned a *retry.Error of 1 attempt, and the outer loop stopped with
// ReasonExhausted: the outer AttemptTimeout no longer recovered from a hung
// call at all. The inner loop never retried, so retrying it does not
// multiply the layers; an inner loop that did retry still ends the outer one.
func TestOuterAttemptTimeoutRetriesInnerLoopCutAtFirstAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		outer := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3, AttemptTimeout: time.Second}
		inner := retry.Policy{Initial: 10 * time.Millisecond, MaxAttempts: 4}
		calls := 0
		err := retry.Do(t.Context(), outer, func(ctx context.Context) error {
			return retry.Do(ctx, inner, func(ctx context.Context) error {
				calls++
				if calls == 1 {
					<-ctx.Done() // the first call hangs
					return ctx.Err()
				}
				return nil
			})
		})
		if err != nil || calls != 2 {
			t.Fatalf("err %v after %d calls; want the hung call retried by the outer loop, success at the 2nd", err, calls)
		}

		// An inner loop that did retry before being cut short still ends
		// the outer loop (no multiplication).
		calls = 0
		err = retry.Do(t.Context(), outer, func(ctx context.Context) error {
			return retry.Do(ctx, retry.Policy{Initial: retry.Immediate, MaxAttempts: 4, AttemptTimeout: 600 * time.Millisecond},
				func(ctx context.Context) error {
					calls++
					<-ctx.Done()
					return ctx.Err()
				})
		})
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonExhausted || calls != 2 {
			t.Fatalf("err %v after %d calls; want ReasonExhausted after the inner loop's 2 calls", err, calls)
		}
	})
}
