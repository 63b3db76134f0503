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
		Policy:   retry.Policy{Initial: 100 * time.Millisecond, Jitter: retry.NoJitter()},
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

// Bronson et al.'s toy stays down after its 10 s blip: every request
// times out and is resent once, so the database sees twice the arrivals.
// A retry budget below its 7 % headroom, with the server dropping expired
// requests, gets it out.
func ExampleRunOpen() {
	for _, remedy := range []string{"none", "budget 0.05 + drop expired"} {
		s := sim.Bronson()
		if remedy != "none" {
			s.Budget = &retry.BudgetConfig{Ratio: 0.05}
			s.DropExpired = true
		}
		r, err := sim.RunOpen(context.Background(), s)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: offered %.0f/s, goodput %.0f/s, recovered %v after %v\n",
			remedy, r.OfferedPerSecond, r.GoodputPerSecond, r.Recovered, r.RecoveryTime)
	}
	// Output:
	// none: offered 560/s, goodput 0/s, recovered false after 0s
	// budget 0.05 + drop expired: offered 280/s, goodput 280/s, recovered true after 0s
}

// The AWS SDKs' retry quota as they keep it: in Bronson's stuck state it
// runs dry after 35 retries and, refilled only by successes, stays dry,
// so the toy recovers as it would with no retries.
func ExampleAWSRetryQuota() {
	s := sim.Bronson()
	q := sim.AWSRetryQuota()
	s.Policy, s.Quota = retry.AWSStandardPolicy(), &q
	r, err := sim.RunOpen(context.Background(), s)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("recovered %v after %v; %d calls stopped by the quota\n", r.Recovered, r.RecoveryTime, r.BudgetRefused)
	// Output:
	// recovered true after 2m7s; 38304 calls stopped by the quota
}

// Work estimates a run before it starts: here 60,000 calls that may each
// time out every 100 ms for a minute with no waits, 601 attempts each.
// RunOpen refuses a scenario whose estimate exceeds MaxWork.
func ExampleOpenScenario_Work() {
	s := sim.OpenScenario{Rate: 1000, ServiceRate: 500, Timeout: 100 * time.Millisecond, Duration: time.Minute,
		Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: retry.Unlimited}}
	fmt.Printf("%.3g attempts\n", s.Work())
	s.MaxWork = 1e7
	_, err := sim.RunOpen(context.Background(), s)
	fmt.Println(err != nil)
	// Output:
	// 3.61e+07 attempts
	// true
}
