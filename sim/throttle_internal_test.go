package sim

import (
	"math"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
)

// The virtual-time throttle computes the rejection probability that
// retry.Throttle computes for the same outcomes, retry.Throttle running on
// synctest's clock. retry.Throttle reads the clock once per 64 outcomes
// and dates them to its last reading, so each step records 64 outcomes,
// which the model dates to the previous step's time, and then compares.
func TestThrottleModelMatchesRetryThrottle(t *testing.T) {
	for _, c := range []retry.ThrottleConfig{
		{},
		{K: 1.1, Window: time.Second},
		{K: 3, Window: 10 * time.Second},
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
				win = retry.DefaultThrottleWindow
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
				for i := range 64 {
					real.Record(i < accepted)
					m.record(0, prev, i < accepted)
				}
				now := int64(time.Since(start))
				got, want := m.probability(m.window(0, now)), real.Probability()
				if math.Abs(got-want) > 1e-12 {
					t.Fatalf("%+v, step %d at %v: model %v, retry.Throttle %v", c, step, time.Duration(now), got, want)
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
