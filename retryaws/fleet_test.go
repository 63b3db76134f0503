package retryaws_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/awsfake"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retryredis"
)

// A Budget shared through a real redis-server (retryredis.ShareBudget)
// bounds the retries of several clients' AWS calls, each client with its
// own Budget, Retryer and DynamoDB client as a process of a fleet would
// have (they run in this test's process; what they share is only the
// redis-server), against a DynamoDB that answers 503 to everything: the
// fleet's retries stay within Ratio × first attempts + MinPerSecond × (T
// + 2 × Window) + one sync interval's allowance per client, the bound of
// ARCHITECTURE.md, while local Budgets each spend their own floor.
func TestFleetBudgetBoundsAWSRetries(t *testing.T) {
	srv := redistest.Start(t)
	const (
		procs    = 4
		ratio    = 0.1
		floor    = 5.0 // MinPerSecond
		window   = time.Second
		run      = time.Second
		rate     = 20 // first attempts per second per client
		interval = 100 * time.Millisecond
	)
	allowance := max(1, floor*interval.Seconds())
	retries := map[bool]int{}
	for _, shared := range []bool{true, false} {
		f := awsfake.New()
		f.Script = func(string, int) awsfake.Answer { return awsfake.Answer{Status: 503, Code: "ServiceUnavailable"} }
		url := start(t, f)
		var calls []func(context.Context) error
		for i := range procs {
			b, err := retry.NewBudget(retry.BudgetConfig{Ratio: ratio, MinPerSecond: floor, Window: window})
			if err != nil {
				t.Fatal(err)
			}
			if shared {
				rc := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
				sh, err := retryredis.ShareBudget(rc, fmt.Sprintf("aws-fleet-%d", time.Now().UnixNano()/int64(time.Hour)), b, retryredis.WithSyncInterval(interval))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { sh.Close(); rc.Close() })
				deadline := time.Now().Add(5 * time.Second)
				for !sh.Shared() && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if !sh.Shared() {
					t.Fatalf("client %d did not join the fleet", i)
				}
			}
			p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 10, Budget: b}
			_, d := clients(url, newRetryer(t, p), nil)
			calls = append(calls, func(ctx context.Context) error { return opGetItem.call(ctx, nil, d) })
		}
		var wg sync.WaitGroup
		startAt := time.Now()
		for _, call := range calls {
			wg.Go(func() {
				tick := time.NewTicker(time.Second / rate)
				defer tick.Stop()
				for time.Since(startAt) < run {
					call(context.Background())
					<-tick.C
				}
			})
		}
		wg.Wait()
		span := time.Since(startAt)
		first, total := f.Firsts(), f.Total()
		retries[shared] = total - first
		bound := ratio*float64(first) + floor*(span+2*window).Seconds() + procs*allowance
		t.Logf("shared %v: %d first attempts, %d retries in %v (bound for one shared Budget: %.1f)", shared, first, total-first, span.Round(time.Millisecond), bound)
		if shared && float64(total-first) > bound {
			t.Errorf("shared: %d retries, above the bound %.1f", total-first, bound)
		}
	}
	if retries[true] >= retries[false] {
		t.Errorf("shared %d retries, local %d: the local Budgets should each have spent their own floor", retries[true], retries[false])
	}
}
