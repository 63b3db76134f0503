package sim_test

import (
	"context"
	"fmt"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sim"
)

// Ten clients hit a server that accepts four requests per 100 ms slot.
func ExampleRun() {
	r, err := sim.Run(context.Background(), sim.Scenario{
		Clients:  10,
		Capacity: 4,
		Policy:   retry.Policy{Initial: 100 * time.Millisecond, Jitter: retry.NoJitter},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Requests, r.Succeeded, r.CompletionMax, r.Load)
	// Output: 18 10 300ms [10 6 0 2]
}

// Four processes, 100 clients, against a backend that is down for good:
// with a budget each, the fleet sends four floors of retries; with one
// shared budget, one.
func ExampleScenario_fleet() {
	for _, shared := range []bool{false, true} {
		r, err := sim.Run(context.Background(), sim.Scenario{
			Clients:      100,
			Outage:       sim.MaxDuration, // dead
			Processes:    4,
			Budget:       &retry.BudgetConfig{Ratio: -1, MinPerSecond: 1, Window: 10 * time.Second}, // 10 retries per 10 s
			SharedBudget: shared,
			Policy:       retry.Policy{MaxAttempts: retry.Unlimited},
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %.0f retries, %.0f clients refused\n", r.Budget, r.Requests-float64(r.Clients), r.BudgetRefused)
	}
	// Output:
	// local: 40 retries, 100 clients refused
	// shared: 10 retries, 100 clients refused
}
