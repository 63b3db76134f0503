package sim

import (
	"math"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/internal/defaults"
	"github.com/retrykit/retry/internal/fleetseam"
)

// The virtual-time throttle computes the rejection probability that
// retry.Throttle computes for the same outcomes, retry.Throttle running on
// synctest's clock. retry.Throttle reads the clock once per 64 outcomes
// and dates them to its last reading, so each step records 64 outcomes,
// which the model dates to the previous step's time up to the one after
// which retry.Throttle reads the clock, and then compares.
// While the probability is above zero, each step then draws decisions on
// both sides until one rejects (the draws differ, the counting must not:
// with CountRejected the rejection is a request, without it nothing).
func TestThrottleModelMatchesRetryThrottle(t *testing.T) {
	for _, c := range []retry.ThrottleConfig{
		{},
		{K: 1.1, Window: time.Second},
		{K: 3, Window: 10 * time.Second},
		{Window: 2 * time.Minute, MaxProbability: 1, CountRejected: true}, // the SRE book's rule
		{K: 1.5, MaxProbability: 0.75, CountRejected: true},
		{MaxProbability: 0.5},
	} {
		synctest.Test(t, func(t *testing.T) {
			real, err := retry.NewThrottle(c)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			var m throttleModel
			m.init(c, 1, false)
			win := c.Window
			if win == 0 {
				win = defaults.ThrottleWindow
			}
			rng := rand.New(rand.NewPCG(3, 4))
			var prev int64
			var peak float64
			for step := range 400 {
				time.Sleep(time.Duration(rng.Int64N(int64(win / 4))))
				accepted := rng.IntN(65)
				if step%50 > 30 {
					accepted = 0 // spells of failure, so that the probability rises
				}
				now := int64(time.Since(start))
				when := prev
				for i := range 64 {
					account.Record(real, i < accepted)
					m.record(0, when, i < accepted)
					if r, _ := fleetseam.ThrottleOf[*retry.Throttle]().LocalCounts(real); r%64 == 0 {
						// retry.Throttle read the clock after this outcome
						// (counted rejections move that point).
						when = now
					}
				}
				got, want := m.probability(m.window(0, now)), real.Probability()
				if math.Abs(got-want) > 1e-12 {
					t.Fatalf("%+v, step %d at %v: model %v, retry.Throttle %v", c, step, time.Duration(now), got, want)
				}
				if want > 0 {
					rejectOnce(t, func() bool { return account.Allow(real) })
					rejectOnce(t, func() bool { return m.allow(0, now, rng) })
				}
				prev = now
				peak = max(peak, want)
			}
			if peak < 0.3 {
				t.Errorf("%+v: the probability never passed %v: the comparison tested little", c, peak)
			}
		})
	}
}

// rejectOnce calls allow until it rejects an attempt (the probability is
// above 0; at most 10,000 tries).
func rejectOnce(t *testing.T, allow func() bool) {
	for range 10000 {
		if !allow() {
			return
		}
	}
	t.Fatal("no rejection in 10,000 decisions")
}
