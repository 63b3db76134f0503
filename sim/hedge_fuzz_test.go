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

// FuzzRunHedge: any hedging scenario is either refused with an error that
// wraps ErrScenario, or runs to a consistent result: at least one copy per
// request, ordered percentiles that are positive (virtual time did not
// wrap), and with a budget no more hedges than its rule grants; never a
// panic or a hang.
func FuzzRunHedge(f *testing.F) {
	f.Add(1000, 1000.0, int64(5*time.Millisecond), 0.5, 0.05, 10.0, 0.0, 0.0, int64(2*time.Millisecond), 0.9, 2, 0.1, uint64(1))
	f.Add(100, 1e-6, int64(10*time.Millisecond), -1.0, 0.0, 0.0, 0.01, 0.5, int64(5*time.Millisecond), 0.0, 3, 0.1, uint64(2))
	f.Add(5, 1e-300, int64(-1), math.NaN(), 2.0, -1.0, 1.5, -0.5, int64(math.MaxInt64), 1.5, 40, -1.0, uint64(0))
	f.Fuzz(func(t *testing.T, requests int, rate float64, mean int64, sigma, stragglers, factor, tail, correlated float64,
		delay int64, quantile float64, copies int, ratio float64, seed uint64) {
		if requests > 5000 {
			requests %= 5000 // shapes, not scale
		}
		s := sim.HedgeScenario{Requests: requests, Rate: rate, Correlated: correlated, Seed: seed,
			Latency: sim.Latency{Mean: time.Duration(mean), Sigma: sigma, Stragglers: stragglers, StragglerFactor: factor,
				Tail: tail, TailLatency: time.Duration(mean) * 100},
			Hedge: &retry.HedgeConfig{FixedDelay: time.Duration(delay), Quantile: quantile, MaxCopies: copies}}
		if quantile != 0 {
			s.Hedge.FixedDelay = 0
		}
		if ratio > 0 {
			s.Budget = &retry.BudgetConfig{Ratio: ratio, MinPerSecond: 1, Window: 10 * time.Second}
		}
		r, err := sim.RunHedge(context.Background(), s)
		if err != nil {
			if !errors.Is(err, sim.ErrScenario) {
				t.Fatalf("%+v: %v does not wrap ErrScenario", s, err)
			}
			return
		}
		n := s.Requests
		if n == 0 {
			n = sim.DefaultHedgeRequests
		}
		if r.Copies < n || r.Extra < 0 || r.Won > n || r.Refused < 0 {
			t.Fatalf("%+v: %d copies for %d requests, extra %v, won %d", s, r.Copies, n, r.Extra, r.Won)
		}
		if !(0 < r.P50 && r.P50 <= r.P95 && r.P95 <= r.P99 && r.P99 <= r.P999 && r.P999 <= r.Max) {
			t.Fatalf("%+v: percentiles %v %v %v %v %v out of order or not positive", s, r.P50, r.P95, r.P99, r.P999, r.Max)
		}
		if s.Budget != nil && s.Hedge.FixedDelay > 0 {
			// Over any window of 10 s the budget grants ratio × the first
			// attempts in it plus 10: the whole run is at most its span
			// (arrivals, then a hedge delay) over 10 s, plus 2, windows.
			rate := s.Rate
			if rate == 0 {
				rate = sim.DefaultHedgeRate
			}
			span := float64(n-1)/rate + s.Hedge.FixedDelay.Seconds()
			if hedges, most := float64(r.Copies-n), ratio*float64(n)+10*(span/10+2); hedges > most {
				t.Fatalf("%+v: %v hedges, the budget grants at most %v", s, hedges, most)
			}
		}
	})
}
