package retry_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// BenchmarkDoSuccessFleet compares the success path of a Policy with a
// Budget and a Throttle that are local with the same pair shared with a
// fleet (fleet counts set as a sync engine sets them). The target:
// shared within 50 ns of local, 0 allocations.
func BenchmarkDoSuccessFleet(b *testing.B) {
	for _, shared := range []bool{false, true} {
		name := "budget=local"
		if shared {
			name = "budget=shared"
		}
		b.Run(name, func(b *testing.B) {
			bud, _ := retry.NewBudget(retry.BudgetConfig{Window: 10 * time.Second})
			th, _ := retry.NewThrottle(retry.ThrottleConfig{Window: time.Minute})
			if shared {
				bud.SetFleet(10000, 100, retry.FleetLease{Retries: 1, Until: time.Now().Add(time.Hour)})
				th.SetFleet(10000, 9000)
			}
			p := retry.Policy{Budget: bud, Throttle: th}
			ctx := context.Background()
			op := func(context.Context) error { return nil }
			b.ReportAllocs()
			for b.Loop() {
				if err := retry.Do(ctx, p, op); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
