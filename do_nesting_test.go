package retry_test

// Nested retry loops: an inner loop that gave up ends an enclosing one
// (layers do not multiply), and an inner loop that an outer AttemptTimeout
// cut short in its first attempt is retried.

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
)

// overloaded returns a Throttle that rejects nearly every attempt: it saw
// 2^20 requests and no accept (p = 1 − 1/(2^20+1)).
func overloaded() *retry.Throttle {
	th, _ := retry.NewThrottle(retry.ThrottleConfig{MaxProbability: 1}) // no cap: p ≈ 1
	for range 1 << 20 {
		account.Record(th, false)
	}
	return th
}

// An inner loop that gave up because its Throttle rejected its last
// attempt returns an *Error wrapping ErrThrottled. An outer loop with a
// Throttle of its own used to retry it (the "rejected locally, retry"
// rule came before the nesting rule), so the layers multiplied exactly
// when the backend was overloaded: 5 outer × 2 inner attempts here.
func TestNestedLoopThrottledInnerIsExhausted(t *testing.T) {
	inner := retry.Policy{Throttle: overloaded(), MaxAttempts: 2, Initial: retry.Immediate}
	outer := retry.Policy{Throttle: &retry.Throttle{}, MaxAttempts: 5, Initial: retry.Immediate}
	calls := 0
	err := retry.Do(context.Background(), outer, func(ctx context.Context) error {
		calls++
		return retry.Do(ctx, inner, func(context.Context) error { return errors.New("unreachable") })
	})
	var re *retry.Error
	if !errors.As(err, &re) || re.Reason != retry.ReasonExhausted || calls != 1 {
		t.Fatalf("outer called the inner loop %d times, err %v; want once, ReasonExhausted", calls, err)
	}
	if !errors.Is(err, retry.ErrThrottled) {
		t.Fatalf("%v does not match ErrThrottled", err)
	}
	// RetryExhausted still lets the outer loop retry it.
	outer.RetryExhausted = true
	calls = 0
	retry.Do(context.Background(), outer, func(ctx context.Context) error {
		calls++
		return retry.Do(ctx, inner, func(context.Context) error { return errors.New("unreachable") })
	})
	if calls != 5 {
		t.Fatalf("with RetryExhausted the outer loop called the inner one %d times, want 5", calls)
	}
}

// The loop's own Throttle rejection is still retried whatever Retryable
// says.
func TestOwnThrottleRejectionStillRetried(t *testing.T) {
	p := retry.Policy{Throttle: overloaded(), MaxAttempts: 3, Initial: retry.Immediate,
		Retryable: func(error) bool { return false }}
	err := retry.Do(context.Background(), p, func(context.Context) error { return errors.New("x") })
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 3 || re.Reason != retry.ReasonAttempts {
		t.Fatalf("err %v, want 3 throttled attempts", err)
	}
}

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

// README: "Nested retry loops don't multiply: an error that already went
// through a Do that gave up (a *retry.Error ...) is not retried again by an
// enclosing Do unless RetryExhausted is set. Inner 4 attempts × outer 4
// attempts = 4 calls, not 16." doc.go: such an error "ends an enclosing loop
// at once with ReasonExhausted". With an AttemptTimeout on the outer loop
// that cut the inner loop short, the outer loop retried the inner one (the
// attempt-timeout rule came before the nesting rule): 12 calls here, and 16
// with hanging calls and a tighter outer timeout. Whether the layers
// multiplied depended on timing: an inner loop with waits gives up a little
// earlier (ReasonDeadline) and was not retried.
func TestNestedLoopUnderOuterAttemptTimeoutDoesNotMultiply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := retry.Policy{Initial: retry.Immediate, MaxAttempts: 4, AttemptTimeout: time.Second}
		outer := retry.Policy{Initial: retry.Immediate, MaxAttempts: 4, AttemptTimeout: 2500 * time.Millisecond}
		calls := 0
		err := retry.Do(t.Context(), outer, func(ctx context.Context) error {
			return retry.Do(ctx, inner, func(ctx context.Context) error {
				calls++
				<-ctx.Done()
				return ctx.Err()
			})
		})
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonExhausted || re.Attempts != 1 || calls != 3 {
			t.Fatalf("calls %d, err %v; want the inner loop's 3 calls once, outer ReasonExhausted after 1 attempt", calls, err)
		}
		// RetryExhausted still retries it.
		outer.RetryExhausted = true
		calls = 0
		retry.Do(t.Context(), outer, func(ctx context.Context) error {
			return retry.Do(ctx, inner, func(ctx context.Context) error {
				calls++
				<-ctx.Done()
				return ctx.Err()
			})
		})
		if calls != 12 {
			t.Fatalf("with RetryExhausted: %d calls, want 4 × 3", calls)
		}
	})
}

// Policy.RetryExhausted: "lets the loop retry an error that wraps an
// [*Error] ... one that an inner retry loop already gave up on";
// Policy.Retryable (nil): every error is retried except ... "context errors
// (...) that did not come from AttemptTimeout". An inner loop whose
// attempts all ran out of the inner AttemptTimeout returns an *Error
// wrapping context.DeadlineExceeded (it came from an AttemptTimeout); the
// outer loop, with RetryExhausted and a live context, stops at once with
// ReasonPermanent instead of retrying.
func TestRetryExhaustedRetriesInnerAttemptTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := retry.Policy{Initial: retry.Immediate, MaxAttempts: 2, AttemptTimeout: time.Millisecond}
		outer := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3, RetryExhausted: true}
		calls := 0
		err := retry.Do(t.Context(), outer, func(ctx context.Context) error {
			return retry.Do(ctx, inner, func(ctx context.Context) error {
				calls++
				<-ctx.Done()
				return ctx.Err()
			})
		})
		var re *retry.Error
		if !errors.As(err, &re) {
			t.Fatalf("err %v", err)
		}
		if calls != 6 || re.Reason != retry.ReasonAttempts {
			t.Fatalf("calls %d, outer Reason %q (err %v); want 3 outer × 2 inner = 6 calls and %q",
				calls, re.Reason, err, retry.ReasonAttempts)
		}
	})
}
