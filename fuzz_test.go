package retry_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

func FuzzPolicy(f *testing.F) {
	f.Add(int64(0), int64(0), 0.0, int64(0), uint8(0), int64(0), 0.0, 0, int64(0))
	f.Add(int64(time.Second), int64(4*time.Second), 2.0, int64(0), uint8(1), int64(0), 0.0, 5, int64(0))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), 1e308, int64(math.MaxInt64), uint8(5), int64(math.MaxInt64), 1.0, 1_000_000, int64(time.Hour))
	f.Add(int64(-1), int64(1), 1.6, int64(0), uint8(6), int64(0), 0.2, 63, int64(-5))
	f.Fuzz(func(t *testing.T, initial, maxDelay int64, mult float64, elapsed int64, kind uint8, amount int64, frac float64, n int, prev int64) {
		var j retry.Jitter
		switch kind % 7 {
		case 1:
			j = retry.NoJitter()
		case 2:
			j = retry.FullJitter()
		case 3:
			j = retry.EqualJitter()
		case 4:
			j = retry.DecorrelatedJitter()
		case 5:
			j = retry.AdditiveJitter(time.Duration(amount))
		case 6:
			j = retry.ProportionalJitter(frac)
		}
		p := retry.Policy{Initial: time.Duration(initial), MaxDelay: time.Duration(maxDelay), Multiplier: mult,
			Jitter: j, MaxElapsed: time.Duration(elapsed), MaxAttempts: 50}
		if p.Validate() != nil {
			for range p.Delays() {
				t.Fatal("invalid policy yielded waits")
			}
			return
		}
		capd := p.MaxDelay
		if capd == 0 {
			capd = retry.DefaultMaxDelay
		}
		// A negative n counts as 0.
		if n < 0 {
			lo, hi := p.Bounds(n)
			lo0, hi0 := p.Bounds(0)
			if lo != lo0 || hi != hi0 {
				t.Fatalf("%+v: Bounds(%d) = [%v,%v], Bounds(0) = [%v,%v]", p, n, lo, hi, lo0, hi0)
			}
			n = -(n + 1) // never negative, even for math.MinInt
		}
		d := p.Delay(n, time.Duration(prev), nil)
		lo, hi := p.Bounds(n)
		// With a seeded source, Delay is the documented formula drawn with
		// math/rand/v2's Int64N (see referenceDelay).
		seed := uint64(initial) ^ uint64(amount)
		r1, r2 := rand.New(rand.NewPCG(seed, 1)), rand.New(rand.NewPCG(seed, 1))
		if got, want := p.Delay(n, time.Duration(prev), r1), referenceDelay(p, n, time.Duration(prev), r2); got != want {
			t.Fatalf("%+v retry %d prev %v: Delay %v, reference %v", p, n, time.Duration(prev), got, want)
		}
		if d < 0 || d > capd || lo > hi || hi > capd || lo < 0 {
			t.Fatalf("%+v retry %d: wait %v bounds [%v,%v] cap %v", p, n, d, lo, hi, capd)
		}
		// Bounds holds every wait, except that a decorrelated wait depends
		// on prev, which here is arbitrary rather than the previous wait.
		if j != retry.DecorrelatedJitter() && (d < lo || d > hi) {
			t.Fatalf("%+v retry %d: wait %v outside Bounds [%v,%v]", p, n, d, lo, hi)
		}
		var total time.Duration
		for _, d := range p.Delays() {
			if d < 0 || d > capd {
				t.Fatalf("%+v: Delays yielded %v", p, d)
			}
			total += d
		}
		if p.MaxElapsed > 0 && total > p.MaxElapsed {
			t.Fatalf("Delays summed to %v past MaxElapsed %v", total, p.MaxElapsed)
		}
	})
}
