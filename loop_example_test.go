package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retrykit/retry"
)

// A client whose own loop makes the attempts and waits (as gax's Retryer
// and valkey-go's retry handler do) asks the Loop after each failure how
// long to wait, or with which error to stop.
func ExamplePolicy_Loop() {
	p := retry.Policy{Initial: 100 * time.Millisecond, Jitter: retry.NoJitter(), MaxAttempts: 3}
	l := p.Loop()
	ctx := context.Background()
	for {
		if _, err := l.Begin(ctx); err != nil {
			panic(err) // no Throttle: never rejected
		}
		err := errors.New("unavailable") // the client's attempt
		wait, stop := l.Failed(ctx, err)
		if stop != nil {
			fmt.Println(stop)
			return
		}
		fmt.Println("wait", wait) // the client sleeps, then sends again
	}
	// Output:
	// wait 100ms
	// wait 200ms
	// retry: gave up after 3 attempts in 0s (attempts used up): unavailable
}
