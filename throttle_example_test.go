package retry_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/retrykit/retry"
)

// Every attempt of a loop that has the Throttle counts. After 100 calls of
// which the backend accepted 20 (the others failed with an overload), the
// SRE formula gives (100 − 2×20)/(100+1). ThrottleAllowAll lets every call
// through while they are counted; the rule decides again once released.
func ExampleThrottle_Probability() {
	th, err := retry.NewThrottle(retry.ThrottleConfig{K: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	th.Override(retry.ThrottleAllowAll)
	p := retry.Policy{MaxAttempts: 1, Throttle: th}
	for i := range 100 {
		_ = retry.Do(context.Background(), p, func(context.Context) error {
			if i < 20 {
				return nil
			}
			return overloadedError{}
		})
	}
	th.Override(retry.ThrottleAuto)
	fmt.Printf("%.3f\n", th.Probability())
	// Output:
	// 0.594
}

// overloadedError is a backend's "overloaded" reply: the Throttle's
// default rule counts it as not accepted.
type overloadedError struct{}

func (overloadedError) Error() string    { return "backend overloaded" }
func (overloadedError) Overloaded() bool { return true }

// During an incident an operator can isolate a backend, as with a circuit
// breaker's manual control, and release it afterwards: while isolated,
// every attempt is rejected locally and never sent.
func ExampleThrottle_Override() {
	var th retry.Throttle // the zero Throttle: the defaults
	p := retry.Policy{MaxAttempts: 1, Throttle: &th}
	op := func(context.Context) error { return nil }
	th.Override(retry.ThrottleRejectAll)
	err := retry.Do(context.Background(), p, op)
	fmt.Println(errors.Is(err, retry.ErrThrottled), th.Probability())
	th.Override(retry.ThrottleAuto)
	err = retry.Do(context.Background(), p, op)
	fmt.Println(err, th.Probability())
	// Output:
	// true 1
	// <nil> 0
}

// An Observer set in the ThrottleConfig hears when the Throttle starts
// and stops rejecting.
func ExampleThrottleConfig_observer() {
	th, err := retry.NewThrottle(retry.ThrottleConfig{
		Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) { fmt.Println(e.Kind) }),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	th.Override(retry.ThrottleRejectAll)
	th.Override(retry.ThrottleAllowAll)
	// Output:
	// throttle_started
	// throttle_stopped
}
