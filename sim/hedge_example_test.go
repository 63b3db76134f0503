package sim_test

import (
	"context"
	"fmt"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sim"
)

// One request in a hundred takes a second; a hedge sent at the p95
// latency (about 10 ms) after the first copy cuts the 99.9th percentile
// from a second to tens of milliseconds for about 6 % more requests.
func ExampleRunHedge() {
	s := sim.HedgeScenario{Requests: 20000, Latency: sim.Latency{Tail: 0.01}}
	none, _ := sim.RunHedge(context.Background(), s)
	s.Hedge = &retry.HedgeConfig{FixedDelay: 10 * time.Millisecond, MaxCopies: 2}
	s.Budget = &retry.BudgetConfig{} // hedges draw on the default retry budget
	hedged, _ := sim.RunHedge(context.Background(), s)
	fmt.Println("p99.9 without hedging:", none.P999)
	fmt.Println("p99.9 hedged under 100ms:", hedged.P999 < 100*time.Millisecond)
	fmt.Printf("extra load: %.0f%%\n", hedged.Extra*100)
	// Output:
	// p99.9 without hedging: 1s
	// p99.9 hedged under 100ms: true
	// extra load: 6%
}
