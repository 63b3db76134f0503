package retry_test

// Promises of the core that a hostile review found broken (each test
// failed before its fix) and the promise each checks.

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
)

// An operation that returns a typed-nil *retry.Error (the classic
// "var e *retry.Error; return e" mistake, e.g. from a helper that returns
// the result of an inner Do through a concrete type) makes Do panic with a
// nil dereference inside the loop's error classification (walk -> Unwrap).
// Mission: never a panic on bad input; doc.go: Do returns an *Error that
// wraps the last attempt's error.
func TestTypedNilErrorFromOpDoesNotPanic(t *testing.T) {
	var panicked any
	func() {
		defer func() { panicked = recover() }()
		p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}
		retry.Do(context.Background(), p, func(context.Context) error {
			var e *retry.Error
			return e // non-nil error interface holding a nil *Error
		})
	}()
	if panicked != nil {
		t.Fatalf("Do panicked on an op returning a typed-nil *retry.Error: %v", panicked)
	}
}

// Policy.Logger set to a Logger without a handler (&slog.Logger{}) makes
// the loop panic at the first retry (Logger.Enabled on a nil Handler).
// Validate accepts the policy. Mission: never a panic on bad input;
// Validate names what is wrong.
func TestLoggerWithoutHandlerDoesNotPanic(t *testing.T) {
	p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 2, Logger: &slog.Logger{}}
	verr := p.Validate()
	var panicked any
	func() {
		defer func() { panicked = recover() }()
		retry.Do(context.Background(), p, func(context.Context) error { return errors.New("x") })
	}()
	if panicked != nil {
		t.Fatalf("Validate() = %v, then Do panicked: %v", verr, panicked)
	}
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
			p := retry.Policy{Initial: time.Second, Jitter: retry.NoJitter, MaxAttempts: 10, MaxElapsed: 3 * time.Second}
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
