package retry_test

import (
	"context"
	"fmt"
	"time"

	"github.com/retrykit/retry"
)

// A read that is stuck gets a second copy after 1 ms; the copy that
// answers first wins and the other is cancelled.
func ExampleHedge() {
	h, err := retry.NewHedger(retry.HedgeConfig{FixedDelay: time.Millisecond})
	if err != nil {
		panic(err)
	}
	p := retry.Policy{Budget: retry.GRPCBudget()} // hedges draw on the retry budget
	err = retry.Hedge(context.Background(), p, h, func(ctx context.Context) error {
		if retry.HedgeAttempt(ctx) == 1 {
			<-ctx.Done() // the first copy hangs until the winner cancels it
			return ctx.Err()
		}
		return nil
	})
	fmt.Println("error:", err)
	// Output: error: <nil>
}

// HedgeValue returns the winner's value; HedgeAttempt tells each copy
// which attempt it is, for a header the server can see.
func ExampleHedgeValue() {
	h, err := retry.NewHedger(retry.HedgeConfig{FixedDelay: time.Millisecond, MaxCopies: 2})
	if err != nil {
		panic(err)
	}
	v, err := retry.HedgeValue(context.Background(), retry.Policy{}, h, func(ctx context.Context) (string, error) {
		n := retry.HedgeAttempt(ctx)
		if n == 1 {
			<-ctx.Done()
			return "", ctx.Err()
		}
		return fmt.Sprintf("answered by attempt %d", n), nil
	})
	fmt.Println(v, err)
	// Output: answered by attempt 2 <nil>
}

// An adaptive Hedger learns the 90th percentile of recent latencies and
// hedges a call once it has been outstanding that long; until it has seen
// WarmUp latencies it does not hedge.
func ExampleNewHedger() {
	h, err := retry.NewHedger(retry.HedgeConfig{Quantile: 0.9, WarmUp: 50})
	if err != nil {
		panic(err)
	}
	_, ok := h.Delay()
	fmt.Println("hedging before the warm-up:", ok)
	// Output: hedging before the warm-up: false
}
