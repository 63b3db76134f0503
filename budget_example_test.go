package retry_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/retrykit/retry"
)

// A Budget shared by every call to a backend: when retries would pass 10% of
// recent requests (plus the floor), Do stops instead of retrying.
func ExampleNewBudget() {
	budget, err := retry.NewBudget(retry.BudgetConfig{Ratio: 0.1, MinPerSecond: -1}) // no floor
	if err != nil {
		fmt.Println(err)
		return
	}
	p := retry.Policy{Initial: retry.Immediate, Budget: budget}
	down := errors.New("backend down")
	for range 3 {
		calls := 0
		err := retry.Do(context.Background(), p, func(context.Context) error { calls++; return down })
		fmt.Println(calls, errors.Is(err, retry.ErrBudgetRefused))
	}
	// Output:
	// 1 true
	// 1 true
	// 1 true
}

// The zero Budget has the defaults: 10% of first attempts plus 1 retry per
// second over a 10 s window, so a quiet client may still retry a little.
func ExampleBudget() {
	p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3, Budget: &retry.Budget{}}
	calls := 0
	err := retry.Do(context.Background(), p, func(context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("transient")
		}
		return nil
	})
	fmt.Println(calls, err)
	// Output: 3 <nil>
}
