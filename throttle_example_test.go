package retry_test

import (
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
