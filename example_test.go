package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retrykit/retry"
)

// errUnavailable stands for a transient failure such as an HTTP 503.
var errUnavailable = errors.New("service unavailable")

// Retry a flaky operation with the reference policy: waits of about 1 s,
// 2 s, 4 s, … (here scaled down to milliseconds so that the example runs
// fast).
func ExampleDo() {
	calls := 0
	p := retry.Policy{Initial: time.Millisecond, MaxDelay: 4 * time.Millisecond}
	err := retry.Do(context.Background(), p, func(ctx context.Context) error {
		calls++
		if calls < 3 {
			return errUnavailable
		}
		return nil
	})
	fmt.Println("calls:", calls, "error:", err)
	// Output: calls: 3 error: <nil>
}

// When the loop gives up, the error wraps the last attempt's error and says
// how many attempts were made and why it stopped.
func ExampleDo_giveUp() {
	p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}
	err := retry.Do(context.Background(), p, func(ctx context.Context) error {
		return errUnavailable
	})
	var re *retry.Error
	if errors.As(err, &re) {
		fmt.Println("attempts:", re.Attempts)
		fmt.Println("reason:", re.Reason)
	}
	fmt.Println("is the last error:", errors.Is(err, errUnavailable))
	// Output:
	// attempts: 3
	// reason: attempts used up
	// is the last error: true
}

// DoValue returns the operation's value.
func ExampleDoValue() {
	calls := 0
	p := retry.Policy{Initial: retry.Immediate}
	v, err := retry.DoValue(context.Background(), p, func(ctx context.Context) (string, error) {
		if calls++; calls < 2 {
			return "", errUnavailable
		}
		return "hello", nil
	})
	fmt.Println(v, err, calls)
	// Output: hello <nil> 2
}

// Permanent stops the loop at once: retrying a bad request cannot help.
func ExamplePermanent() {
	errBadRequest := errors.New("400 bad request")
	calls := 0
	err := retry.Do(context.Background(), retry.Policy{}, func(ctx context.Context) error {
		calls++
		return retry.Permanent(errBadRequest)
	})
	fmt.Println("calls:", calls)
	fmt.Println(errors.Is(err, errBadRequest), retry.IsPermanent(err))
	// Output:
	// calls: 1
	// true true
}

// After passes on how long the server asked us to wait (an HTTP
// Retry-After). The loop waits at least that long; if the wait does not fit
// in the time budget or before the context's deadline, it gives up at once.
func ExampleAfter() {
	p := retry.Policy{
		Initial:    time.Millisecond,
		MaxDelay:   time.Millisecond,
		Jitter:     retry.NoJitter(),
		MaxElapsed: time.Second,
		Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			if e.Kind == retry.EventRetry {
				fmt.Println("retry", e.Attempt, "after", e.Delay)
			}
		}),
	}
	calls := 0
	err := retry.Do(context.Background(), p, func(ctx context.Context) error {
		calls++
		switch calls {
		case 1:
			return retry.ServerWait(errUnavailable, 3*time.Millisecond) // longer than 1 ms: used
		case 2:
			return retry.ServerWait(errUnavailable, time.Hour) // past MaxElapsed: give up now
		}
		return nil
	})
	var re *retry.Error
	errors.As(err, &re)
	fmt.Println("calls:", calls, "reason:", re.Reason)
	// Output:
	// retry 1 after 3ms
	// calls: 2 reason: time budget used up
}

// Delays shows a policy's schedule. Without jitter, Initial 1 s, Multiplier
// 2, MaxDelay 4 s and 5 attempts give the waits 1 s, 2 s, 4 s, 4 s: the cap
// ends the growth, not the retries.
func ExamplePolicy_Delays() {
	p := retry.Policy{
		Initial:     time.Second,
		Multiplier:  2,
		MaxDelay:    4 * time.Second,
		Jitter:      retry.NoJitter(),
		MaxAttempts: 5,
	}
	for n, d := range p.Delays() {
		fmt.Println(n, d)
	}
	// Output:
	// 1 1s
	// 2 2s
	// 3 4s
	// 4 4s
}

// Bounds gives the range each wait is drawn from. The zero Policy is the
// published cloud guidance: min(2^n s + uniform 0..1 s, 32 s).
func ExamplePolicy_Bounds() {
	p := retry.Policy{}
	for _, n := range []int{0, 1, 4, 5, 20} {
		lo, hi := p.Bounds(n)
		fmt.Printf("retry %d: %v..%v\n", n+1, lo, hi)
	}
	// Output:
	// retry 1: 1s..2s
	// retry 2: 2s..3s
	// retry 5: 16s..17s
	// retry 6: 32s..32s
	// retry 21: 32s..32s
}

// The presets: the cloud guidance (the zero Policy), the AWS SDKs'
// standard mode and gRPC's connection backoff.
func ExamplePolicy_presets() {
	for _, preset := range []struct {
		name string
		p    retry.Policy
	}{
		{"default", retry.Policy{}},
		{"aws", retry.AWSStandardPolicy()},
		{"grpc", retry.GRPCConnectPolicy()},
	} {
		lo, hi := preset.p.Bounds(0)
		fmt.Printf("%-7s jitter %-16v first wait %v..%v\n", preset.name, preset.p.Jitter, lo, hi)
	}
	// Output:
	// default jitter additive         first wait 1s..2s
	// aws     jitter full             first wait 0s..50ms
	// grpc    jitter proportional:0.2 first wait 800ms..1.2s
}

// Validate names the field that makes no sense; Do returns the same error
// without calling the operation.
func ExamplePolicy_Validate() {
	p := retry.Policy{Initial: 10 * time.Second, MaxDelay: time.Second}
	fmt.Println(p.Validate())
	err := retry.Do(context.Background(), p, func(ctx context.Context) error {
		panic("not called")
	})
	fmt.Println(errors.Is(err, retry.ErrInvalidPolicy))
	// Output:
	// retry: invalid policy: MaxDelay 1s is below Initial 10s
	// true
}

// An Observer sees every attempt, each retry before its wait, and the end
// of the call; use it for metrics, traces or logs.
func ExampleObserverFunc() {
	p := retry.Policy{
		Initial:     time.Millisecond,
		MaxDelay:    2 * time.Millisecond,
		Jitter:      retry.NoJitter(),
		MaxAttempts: 3,
		Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			switch e.Kind {
			case retry.EventRetry:
				fmt.Printf("attempt %d/%d failed (%v), waiting %v\n", e.Attempt, e.MaxAttempts, e.Err, e.Delay)
			case retry.EventDone:
				fmt.Printf("done after %d attempts, %v waited, reason: %v\n", e.Attempt, e.Waited, e.Reason)
			}
		}),
	}
	retry.Do(context.Background(), p, func(ctx context.Context) error {
		return errUnavailable
	})
	// Output:
	// attempt 1/3 failed (service unavailable), waiting 1ms
	// attempt 2/3 failed (service unavailable), waiting 2ms
	// done after 3 attempts, 3ms waited, reason: attempts used up
}

// An inner loop's give-up is not retried by an outer loop: nested retry
// layers do not multiply the calls (4 here, not 16).
func ExampleIsExhausted() {
	calls := 0
	p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 4}
	err := retry.Do(context.Background(), p, func(ctx context.Context) error {
		return retry.Do(ctx, p, func(ctx context.Context) error {
			calls++
			return errUnavailable
		})
	})
	fmt.Println("calls:", calls, "exhausted:", retry.IsExhausted(err))
	fmt.Println(err.(*retry.Error).Reason)
	// Output:
	// calls: 4 exhausted: true
	// inner retry loop already gave up
}

// Cancelling the context ends the loop; the error matches both the
// context's error and the last attempt's error.
func ExampleDo_cancel() {
	ctx, cancel := context.WithCancel(context.Background())
	// Cancel when the first wait is about to start.
	p := retry.Policy{Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
		if e.Kind == retry.EventRetry {
			cancel()
		}
	})}
	err := retry.Do(ctx, p, func(ctx context.Context) error {
		return errUnavailable
	})
	fmt.Println(errors.Is(err, context.Canceled), errors.Is(err, errUnavailable))
	// Output: true true
}
