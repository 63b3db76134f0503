package sim_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sim"
)

// FuzzRun: any scenario either is rejected with an error or simulates to a
// consistent result (every client succeeded or gave up); never a panic.
func FuzzRun(f *testing.F) {
	f.Add(uint8(0), 100, 10, int64(100*time.Millisecond), int64(time.Second), int64(0), int64(0), int64(10*time.Millisecond), int64(2*time.Millisecond), 1, uint64(1), 0)
	f.Add(uint8(1), 20, 0, int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), 2, uint64(7), 5)
	f.Add(uint8(0), 0, -1, int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), -1, uint64(0), -3)
	f.Add(uint8(9), 5, 1, int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), 1, uint64(3), 1)
	f.Fuzz(func(t *testing.T, model uint8, clients, capacity int, slot, outage, window, retryAfter, lat, sd int64, trials int, seed uint64, attempts int) {
		// Keep each run small: the fuzzer explores shapes, not scale.
		if clients > 200 {
			clients %= 200
		}
		if trials > 3 {
			trials %= 3
		}
		if attempts > 20 || attempts < retry.Unlimited {
			attempts %= 20
		}
		if attempts == retry.Unlimited {
			attempts = 20
		}
		sc := sim.Scenario{
			Model: sim.Model(model % 3), Clients: clients, Capacity: capacity, Slot: time.Duration(slot),
			Outage: time.Duration(outage), StartWindow: time.Duration(window), RetryAfter: time.Duration(retryAfter),
			Latency: time.Duration(lat), LatencySD: time.Duration(sd), Trials: trials, Seed: seed,
			Policy: retry.Policy{MaxAttempts: attempts, Initial: time.Millisecond, MaxDelay: time.Second},
		}
		// The seed's low bits also pick a fleet, a budget and zero waits.
		if seed&1 != 0 {
			sc.Budget = &retry.BudgetConfig{Ratio: float64(seed>>8%5) / 10, MinPerSecond: float64(seed>>12%3) - 1,
				Window: time.Duration(seed>>16%4) * time.Second}
			sc.SharedBudget = seed&2 != 0
		}
		sc.Processes = int(seed >> 2 % 4)
		if seed&16 != 0 {
			sc.Policy.Initial = retry.Immediate
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		res, err := sim.Run(ctx, sc)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				t.Skip("scenario too slow for fuzzing")
			}
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if got := res.Succeeded + res.GaveUp; math.Abs(got-float64(res.Clients)) > 1e-6 || res.BudgetRefused > res.GaveUp {
			t.Fatalf("%+v: succeeded %v + gave up %v != clients %d", sc, res.Succeeded, res.GaveUp, res.Clients)
		}
		if res.Requests < res.Succeeded || res.CompletionP50 < 0 || res.CompletionMax < res.CompletionP50 ||
			res.PeakLoad > res.Requests || res.PeakLoad*float64(res.Trials) < 1 {
			t.Fatalf("%+v: inconsistent result %+v", sc, res)
		}
	})
}

func TestScenarioDurationsBounded(t *testing.T) {
	for _, sc := range []sim.Scenario{
		{Clients: 1, Outage: sim.MaxDuration + 1},
		{Clients: 1, Slot: -1},
		{Clients: 1, Policy: retry.Policy{MaxDelay: sim.MaxDuration + 1}},
	} {
		if _, err := sim.Run(context.Background(), sc); !errors.Is(err, sim.ErrScenario) {
			t.Errorf("Run(%+v) = %v, want ErrScenario", sc, err)
		}
	}
	if _, err := sim.Run(context.Background(), sim.Scenario{Clients: 1, Outage: sim.MaxDuration}); err != nil {
		t.Errorf("Outage at MaxDuration: %v", err)
	}
}
