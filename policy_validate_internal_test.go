package retry

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestFastValidImpliesValid: fastValid is a shortcut of validateSlow. For
// policies built from edge values of every field it checks, fastValid never
// accepts what validateSlow rejects, and it accepts the common shapes,
// Immediate included, so that Do skips the full check for them.
func TestFastValidImpliesValid(t *testing.T) {
	durs := []time.Duration{0, Immediate, -2, 1, time.Second, DefaultMaxDelay, DefaultMaxDelay + 1, math.MaxInt64}
	mults := []float64{0, math.Copysign(0, -1), 0.5, 1, 2, math.Inf(1), math.NaN()}
	jitters := []Jitter{{}, NoJitter(), FullJitter(), EqualJitter(), DecorrelatedJitter(),
		AdditiveJitter(-1), AdditiveJitter(time.Second), ProportionalJitter(-0.1), ProportionalJitter(0.2),
		ProportionalJitter(math.NaN()), {kind: 200}}
	attempts := []int{-2, Unlimited, 0, 1, 10}
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(ds []time.Duration) time.Duration { return ds[r.IntN(len(ds))] }
	for range 200000 {
		p := Policy{
			Initial: pick(durs), MaxDelay: pick(durs), MaxElapsed: pick(durs), AttemptTimeout: pick(durs),
			Multiplier: mults[r.IntN(len(mults))], Jitter: jitters[r.IntN(len(jitters))],
			MaxAttempts: attempts[r.IntN(len(attempts))],
		}
		if p.fastValid() {
			if err := p.validateSlow(); err != nil {
				t.Fatalf("%+v: fastValid accepts it, validateSlow says %v", p, err)
			}
		}
	}
	for _, p := range []Policy{{}, {Initial: Immediate}, {Initial: Immediate, MaxAttempts: 4},
		{Initial: Immediate, MaxDelay: time.Nanosecond, Jitter: FullJitter()}, AWSStandardPolicy(),
		{Initial: 10 * time.Millisecond}, {Initial: time.Second, MaxDelay: time.Second}} {
		if !p.fastValid() {
			t.Errorf("%+v: not on the fast path", p)
		}
	}
}
