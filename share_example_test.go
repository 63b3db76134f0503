package retry_test

import (
	"fmt"
	"time"

	"github.com/retrykit/retry"
)

// A sync engine (retryredis, retryvalkey) tells a Budget what the other
// processes did; the Budget keeps deciding locally from its own counts
// plus theirs.
func ExampleBudget_SetFleet() {
	b, _ := retry.NewBudget(retry.BudgetConfig{Ratio: 0.1, MinPerSecond: 1, Window: 10 * time.Second})
	fmt.Println(b.Config())

	// The other processes spent 9 of the fleet's reserve of 10 retries,
	// and the store leased this process 1 of what is left, from its
	// counts as the sync pushed them.
	first, retries := b.LocalCounts()
	b.SetFleet(0, 9, retry.FleetLease{Retries: 1, FirstAttempts: first, Granted: retries, Until: time.Now().Add(time.Second)})
	fmt.Println(b.AllowRetry(), b.AllowRetry())

	first, retries = b.LocalCounts() // what the engine pushes next
	fmt.Println(first, retries, b.FleetAsked())

	// The store is down: back to a local budget with its own reserve.
	b.ClearFleet()
	fmt.Println(b.AllowRetry())
	// Output:
	// {0.1 1 10s}
	// true false
	// 0 1 2
	// true
}

// The Throttle's rejection probability counts the fleet's requests and
// accepts.
func ExampleThrottle_SetFleet() {
	t, _ := retry.NewThrottle(retry.ThrottleConfig{K: 2})
	fmt.Printf("%.2f\n", t.Probability())
	t.SetFleet(1000, 100) // the others: 1000 requests, 100 accepted
	fmt.Printf("%.2f\n", t.Probability())
	requests, accepts := t.LocalCounts()
	fmt.Println(requests, accepts, t.Config().K)
	t.ClearFleet()
	fmt.Printf("%.2f\n", t.Probability())
	// Output:
	// 0.00
	// 0.80
	// 0 0 2
	// 0.00
}
