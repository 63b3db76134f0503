package retry_test

import (
	"context"
	"fmt"

	"github.com/retrykit/retry"
)

// A transport that does not go through Do can use a Throttle directly:
// Allow before sending, Record after. After 100 attempts of which the
// backend accepted 20, the SRE formula gives (100 − 2×20)/(100+1).
func ExampleThrottle_Allow() {
	th, err := retry.NewThrottle(retry.ThrottleConfig{K: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(th.Allow()) // nothing known yet: never rejected
	for i := range 100 {
		th.Record(i < 20)
	}
	fmt.Printf("%.3f\n", th.Probability())
	// Output:
	// true
	// 0.594
}

// During an incident an operator can isolate a backend, as with a circuit
// breaker's manual control, and release it afterwards.
func ExampleThrottle_Override() {
	var th retry.Throttle // the zero Throttle: the defaults
	th.Override(retry.ThrottleRejectAll)
	fmt.Println(th.Allow(), th.Probability())
	th.Override(retry.ThrottleAuto)
	fmt.Println(th.Allow(), th.Probability())
	// Output:
	// false 1
	// true 0
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
