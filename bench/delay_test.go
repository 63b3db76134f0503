package bench

import (
	"math/rand/v2"
	"testing"
	"time"

	avast "github.com/avast/retry-go/v4"
	cenkalti "github.com/cenkalti/backoff/v5"
	retryablehttp "github.com/hashicorp/go-retryablehttp"
	sethvargo "github.com/sethvargo/go-retry"

	retry "github.com/retrykit/retry"
)

// The delay workloads compute waits of the seed schedule: 1 s doubling,
// capped at 32 s. BenchmarkDelay and BenchmarkDelayNoJitter take one wait
// per operation, for retries 1..10 in turn (0-based 0..9 in retrykit's
// Delay); BenchmarkSchedule64 takes the whole schedule of retries 1..64 per
// operation. Each library is used as its documentation shows, with state
// built once where it can be reset and rebuilt where it cannot (that cost is
// then part of the workload):
//
//   - retrykit: the zero Policy (additive jitter, uniform 0..1 s, then the
//     32 s cap) or NoJitter; Delay(n, prev, nil), or ranging over Delays()
//     of a Policy with MaxAttempts 65.
//   - cenkalti: ExponentialBackOff 1 s, ×2, MaxInterval 32 s, its default
//     RandomizationFactor 0.5 (0 without jitter); NextBackOff, Reset after
//     each schedule.
//   - avast: a Config set through its options Delay(1 s), MaxJitter(1 s)
//     and MaxDelay(32 s), and its default delay type
//     CombineDelay(BackOffDelay, RandomDelay) (BackOffDelay alone without
//     jitter), capped at MaxDelay as avast's loop caps it (the cap is not
//     part of its delay functions).
//   - sethvargo: WithCappedDuration(32 s, WithJitter(1 s, NewExponential(1 s)))
//     (without WithJitter for no jitter); Next; rebuilt for each schedule
//     (it is stateful and cannot be reset).
//   - retryablehttp: DefaultBackoff(1 s, 32 s, n, nil), only in the
//     workload without jitter: its exponential backoff has no jitter (its
//     only jittered backoff, LinearJitterBackoff, is linear and seeds a new
//     generator from the clock on every call).
//   - floor (a baseline, not a peer): hand-written min(2^n·1 s + U, 32 s)
//     with U = rand.Int64N(1 s + 1) from math/rand/v2, overflow-safe
//     (min(2^n·1 s, 32 s) without jitter), inlined into the benchmark loop.
//
// failsafe-go exposes no delay function outside its executor, so it is
// absent.

const (
	seedInitial = time.Second
	seedCap     = 32 * time.Second
	seedJitter  = time.Second
)

var sinkDelay time.Duration

// floorBase is min(2^n·seedInitial, seedCap) for n >= 0, without overflow.
func floorBase(n int) time.Duration {
	if n < 62 && seedInitial <= seedCap>>n {
		return seedInitial << n
	}
	return seedCap
}

// floorJitter is the hand-written wait with jitter: min(2^n·1 s + U[0, 1 s], 32 s).
func floorJitter(n int) time.Duration {
	return min(floorBase(n)+time.Duration(rand.Int64N(int64(seedJitter)+1)), seedCap)
}

// avastConfig returns an avast Config for the seed schedule, with the
// jitter maximum given (zero: none).
func avastConfig(jitter time.Duration) *avast.Config {
	var cfg avast.Config
	for _, o := range []avast.Option{avast.Delay(seedInitial), avast.MaxDelay(seedCap), avast.MaxJitter(jitter)} {
		o(&cfg)
	}
	return &cfg
}

// avastCap applies avast's MaxDelay as its retry loop does.
func avastCap(d time.Duration) time.Duration {
	if d > seedCap {
		return seedCap
	}
	return d
}

var avastJittered = avast.CombineDelay(avast.BackOffDelay, avast.RandomDelay)

func cenkaltiBackOff(randomization float64) *cenkalti.ExponentialBackOff {
	eb := cenkalti.NewExponentialBackOff()
	eb.InitialInterval, eb.Multiplier, eb.MaxInterval, eb.RandomizationFactor = seedInitial, 2, seedCap, randomization
	return eb
}

func sethvargoBackOff(jitter bool) sethvargo.Backoff {
	b := sethvargo.NewExponential(seedInitial)
	if jitter {
		b = sethvargo.WithJitter(seedJitter, b)
	}
	return sethvargo.WithCappedDuration(seedCap, b)
}

// BenchmarkDelay: one wait with jitter per operation, retries 1..10 in turn.
func BenchmarkDelay(b *testing.B) {
	b.Run("lib=retrykit", func(b *testing.B) {
		var p retry.Policy
		b.ReportAllocs()
		n, prev := 0, time.Duration(0)
		for b.Loop() {
			prev = p.Delay(n, prev, nil)
			if n++; n == 10 {
				n = 0
			}
		}
		sinkDelay = prev
	})
	b.Run("lib=cenkalti", func(b *testing.B) {
		eb := cenkaltiBackOff(0.5)
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			sinkDelay = eb.NextBackOff()
			if n++; n == 10 {
				n = 0
				eb.Reset()
			}
		}
	})
	b.Run("lib=avast", func(b *testing.B) {
		cfg := avastConfig(seedJitter)
		b.ReportAllocs()
		n := uint(1)
		for b.Loop() {
			sinkDelay = avastCap(avastJittered(n, nil, cfg))
			if n++; n == 11 {
				n = 1
			}
		}
	})
	b.Run("lib=sethvargo", func(b *testing.B) {
		bo := sethvargoBackOff(true)
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			sinkDelay, _ = bo.Next()
			if n++; n == 10 {
				n = 0
				bo = sethvargoBackOff(true)
			}
		}
	})
	b.Run("lib=floor", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			sinkDelay = floorJitter(n)
			if n++; n == 10 {
				n = 0
			}
		}
	})
}

// BenchmarkDelayNoJitter: as BenchmarkDelay with jitter off everywhere, so
// that libraries without jitter are compared on equal work.
func BenchmarkDelayNoJitter(b *testing.B) {
	b.Run("lib=retrykit", func(b *testing.B) {
		p := retry.Policy{Jitter: retry.NoJitter()}
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			sinkDelay = p.Delay(n, 0, nil)
			if n++; n == 10 {
				n = 0
			}
		}
	})
	b.Run("lib=cenkalti", func(b *testing.B) {
		eb := cenkaltiBackOff(0)
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			sinkDelay = eb.NextBackOff()
			if n++; n == 10 {
				n = 0
				eb.Reset()
			}
		}
	})
	b.Run("lib=avast", func(b *testing.B) {
		cfg := avastConfig(0)
		b.ReportAllocs()
		n := uint(1)
		for b.Loop() {
			sinkDelay = avastCap(avast.BackOffDelay(n, nil, cfg))
			if n++; n == 11 {
				n = 1
			}
		}
	})
	b.Run("lib=sethvargo", func(b *testing.B) {
		bo := sethvargoBackOff(false)
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			sinkDelay, _ = bo.Next()
			if n++; n == 10 {
				n = 0
				bo = sethvargoBackOff(false)
			}
		}
	})
	b.Run("lib=retryablehttp", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			sinkDelay = retryablehttp.DefaultBackoff(seedInitial, seedCap, n, nil)
			if n++; n == 10 {
				n = 0
			}
		}
	})
	b.Run("lib=floor", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			sinkDelay = floorBase(n)
			if n++; n == 10 {
				n = 0
			}
		}
	})
}

// schedule is the number of waits in BenchmarkSchedule64.
const schedule = 64

// BenchmarkSchedule64: the whole schedule with jitter, the waits before
// retries 1..64 (most of them at the cap), per operation.
func BenchmarkSchedule64(b *testing.B) {
	b.Run("lib=retrykit", func(b *testing.B) {
		p := retry.Policy{MaxAttempts: schedule + 1}
		b.ReportAllocs()
		for b.Loop() {
			var sum time.Duration
			for _, d := range p.Delays() {
				sum += d
			}
			sinkDelay = sum
		}
	})
	b.Run("lib=cenkalti", func(b *testing.B) {
		eb := cenkaltiBackOff(0.5)
		b.ReportAllocs()
		for b.Loop() {
			eb.Reset()
			var sum time.Duration
			for range schedule {
				sum += eb.NextBackOff()
			}
			sinkDelay = sum
		}
	})
	b.Run("lib=avast", func(b *testing.B) {
		cfg := avastConfig(seedJitter)
		b.ReportAllocs()
		for b.Loop() {
			var sum time.Duration
			for n := uint(1); n <= schedule; n++ {
				sum += avastCap(avastJittered(n, nil, cfg))
			}
			sinkDelay = sum
		}
	})
	b.Run("lib=sethvargo", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			bo := sethvargoBackOff(true)
			var sum time.Duration
			for range schedule {
				d, _ := bo.Next()
				sum += d
			}
			sinkDelay = sum
		}
	})
	b.Run("lib=floor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var sum time.Duration
			for n := range schedule {
				sum += floorJitter(n)
			}
			sinkDelay = sum
		}
	})
}
