package retry_test

import (
	"context"
	"errors"
	"testing"

	"github.com/retrykit/retry"
)

// overloaded returns a Throttle that rejects nearly every attempt: it saw
// 2^20 requests and no accept (p = 1 − 1/(2^20+1)).
func overloaded() *retry.Throttle {
	th, _ := retry.NewThrottle(retry.ThrottleConfig{})
	for range 1 << 20 {
		th.Record(false)
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
