package retry_test

// Promises of the core that a hostile audit found broken; each
// test failed before its fix.

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
)

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
			p := retry.Policy{Initial: time.Second, Jitter: retry.NoJitter, MaxAttempts: 2,
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

// README: "Errors that report Overloaded() (retryhttp's 429 and 503) and
// attempt timeouts count as rejections; other errors count as accepted".
// An attempt that ran out of its AttemptTimeout counted as accepted unless
// its error wrapped context.DeadlineExceeded itself: an operation that
// reports the timeout in its own error type (a gRPC status
// DEADLINE_EXCEEDED from a raw client call, an error string) or ignores
// its context kept a Throttle from ever throttling a backend that times
// out, although the loop itself knew the attempt had timed out (it
// retried it whatever Retryable said).
func TestAttemptTimeoutCountsAsThrottleRejection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, _ := retry.NewThrottle(retry.ThrottleConfig{})
		p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3, AttemptTimeout: time.Second, Throttle: th}
		errTimeout := errors.New("rpc error: code = DeadlineExceeded desc = context deadline exceeded")
		retry.Do(t.Context(), p, func(ctx context.Context) error {
			<-ctx.Done()
			return errTimeout // the timeout, in the client's own error type
		})
		if requests, accepts := th.LocalCounts(); requests != 3 || accepts != 0 {
			t.Fatalf("3 timed-out attempts: Throttle counted %d requests, %d accepted; want 3, 0", requests, accepts)
		}
	})
}

// constSource always returns the largest value, so that a bounded draw
// returns its maximum.
type constSource struct{}

func (constSource) Uint64() uint64 { return math.MaxUint64 }

// Bounds: "Every wait lies in the closed range [lo, hi]"; doc.go: "for any
// Initial, Multiplier and MaxDelay up to the int64 limit". The decorrelated
// upper bound was computed in float64 (Initial × 3^(n+1)), which rounds
// below the integer 3 × previous wait that Delay draws up to once the
// product passes 2^53 ns (104 days): Delay returned waits above Bounds' hi.
func TestDecorrelatedBoundsHoldTheLargestWait(t *testing.T) {
	p := retry.Policy{Initial: 1<<53 + 1, MaxDelay: math.MaxInt64, Jitter: retry.DecorrelatedJitter}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	r := rand.New(constSource{})
	var prev time.Duration
	for n := range 5 {
		d := p.Delay(n, prev, r)
		if lo, hi := p.Bounds(n); d < lo || d > hi {
			t.Fatalf("retry %d: Delay %d outside Bounds [%d, %d]", n, d, lo, hi)
		}
		prev = d
	}
	// The float bound was right below 2^53 ns, and must stay so.
	q := retry.Policy{Initial: time.Millisecond, MaxDelay: time.Hour, Jitter: retry.DecorrelatedJitter}
	for n := range 20 {
		_, hi := q.Bounds(n)
		want := min(time.Duration(float64(time.Millisecond)*math.Pow(3, float64(n+1))), time.Hour)
		if hi != want {
			t.Fatalf("Bounds(%d) hi %v, want %v", n, hi, want)
		}
	}
}

// sliceError is an error of a type that == cannot compare.
type sliceError []string

func (e sliceError) Error() string { return "slice error" }

// endedContext is a Context that has ended with err.
type endedContext struct {
	context.Context
	err error
}

func (c endedContext) Err() error { return c.err }

func (c endedContext) Done() <-chan struct{} {
	done := make(chan struct{})
	close(done)
	return done
}

// errors.Is never panics: a *retry.Error whose Cause (the context's error)
// is of a type that == cannot compare, matched against a target of that
// type, compared them with == and panicked ("comparing uncomparable
// type").
func TestErrorIsUncomparableCause(t *testing.T) {
	ctx := endedContext{context.Background(), sliceError{"ended"}}
	err := retry.Do(ctx, retry.Policy{}, func(context.Context) error { return nil })
	var re *retry.Error
	if !errors.As(err, &re) || re.Cause == nil {
		t.Fatalf("err %v, want a *retry.Error with the context's error as Cause", err)
	}
	if errors.Is(err, sliceError{"other"}) {
		t.Error("matched an error that is not the cause")
	}
}
