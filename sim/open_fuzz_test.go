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

// FuzzRunOpen: any open scenario is either rejected with an error that
// wraps ErrScenario or retry.ErrInvalidPolicy, or runs to a consistent
// result (the series sums to the totals, goodput and wasted work make up
// what was served, no call ends twice); never a panic.
func FuzzRunOpen(f *testing.F) {
	f.Add(100.0, 200.0, int64(time.Second), 0, false, int64(10*time.Second), int64(5*time.Second), 0.0, 2.0, int64(time.Minute), int64(0), 5, true, 0.1, 2.0, 1, uint64(1))
	f.Add(10.0, 5.0, int64(0), 3, true, int64(0), int64(0), 1.0, 0.0, int64(time.Second), int64(time.Millisecond), -1, false, -1.0, 0.0, 3, uint64(2))
	f.Add(-1.0, math.NaN(), int64(-1), -1, false, int64(-1), int64(-1), 2.0, -1.0, int64(0), int64(-1), -2, true, math.Inf(1), 0.5, -1, uint64(0))
	f.Fuzz(func(t *testing.T, rate, serviceRate float64, timeout int64, queueLimit int, drop bool, trigAt, trigFor int64,
		frac, spike float64, duration, slot int64, attempts int, immediate bool, ratio, k float64, procs int, seed uint64) {
		// Keep each run small: the fuzzer explores shapes, not scale.
		if rate > 2000 {
			rate = math.Mod(rate, 2000)
		}
		if duration > int64(time.Minute) {
			duration %= int64(time.Minute)
		}
		if attempts > 10 {
			attempts %= 10
		}
		if procs > 50 {
			procs %= 50
		}
		p := retry.Policy{MaxAttempts: attempts, Initial: 10 * time.Millisecond, MaxDelay: time.Second}
		if immediate {
			p.Initial = retry.Immediate
		}
		s := sim.OpenScenario{Rate: rate, Arrivals: sim.Arrivals(seed % 3), ServiceRate: serviceRate, QueueLimit: queueLimit,
			DropExpired: drop, Timeout: time.Duration(timeout), TriggerAt: time.Duration(trigAt), TriggerFor: time.Duration(trigFor),
			TriggerCapacity: frac, SpikeAt: time.Duration(trigAt), SpikeFor: time.Duration(trigFor), SpikeFactor: spike,
			Duration: time.Duration(duration), Slot: time.Duration(slot), Seed: seed, Policy: p, Processes: procs}
		if ratio != 0 {
			s.Budget = &retry.BudgetConfig{Ratio: ratio}
		}
		if k != 0 {
			s.Throttle = &retry.ThrottleConfig{K: k, Window: time.Second}
		}
		if s.Slot > 0 && s.Slot < time.Millisecond {
			s.Slot = time.Millisecond // at most 60,000 slots
		}
		// Bounded work and memory: a fraction of a second and 256 MiB an
		// input, however its shape multiplies them (a huge SpikeFactor,
		// nanosecond timeouts or waits).
		s.MaxWork, s.MaxMemory = 2e6, 256<<20
		r, err := sim.RunOpen(context.Background(), s)
		if err != nil {
			if !errors.Is(err, sim.ErrScenario) && !errors.Is(err, retry.ErrInvalidPolicy) {
				t.Fatalf("%+v: %v wraps neither ErrScenario nor ErrInvalidPolicy", s, err)
			}
			if verr := s.Validate(); verr == nil {
				t.Logf("%+v: valid, yet RunOpen: %v", s, err) // a runtime bound, not a refusal
			}
			return
		}
		var sum sim.OpenSlot
		for _, x := range r.Series {
			sum.Arrivals += x.Arrivals
			sum.Sent += x.Sent
			sum.Served += x.Served
			sum.Goodput += x.Goodput
			sum.Wasted += x.Wasted
		}
		if sum.Arrivals != r.Total.Arrivals || sum.Sent != r.Total.Sent || sum.Goodput+sum.Wasted != sum.Served ||
			r.Succeeded != r.Total.Goodput || r.Succeeded+r.GaveUp > r.Total.Arrivals || r.BudgetRefused > r.GaveUp ||
			r.Total.Rejected > r.Total.Sent || (s.DropExpired && r.Total.Wasted > r.Total.Served) {
			t.Fatalf("%+v: inconsistent result %+v, succeeded %d, gave up %d", s, r.Total, r.Succeeded, r.GaveUp)
		}
		if r.Recovered && r.RecoveryTime < 0 || r.Recovered && r.CannotTell {
			t.Fatalf("recovered %v after %v, cannot tell %v", r.Recovered, r.RecoveryTime, r.CannotTell)
		}
	})
}
