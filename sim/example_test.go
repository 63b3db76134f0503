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
