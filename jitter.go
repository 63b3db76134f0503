package retry

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Jitter says how a computed wait is randomised so that many clients that
// failed together do not retry together.
//
// The zero Jitter is the reference behaviour, [AdditiveJitter] of one
// second: each wait gets a fresh uniform 0..1000 ms added before it is
// capped at the policy's MaxDelay. Jitter values are comparable, immutable
// and safe to share.
//
// Whatever the jitter, every wait lies in [0, MaxDelay].
type Jitter struct {
	kind   jitterKind
	amount time.Duration // additive maximum
	frac   float64       // proportional fraction
}

type jitterKind uint8

const (
	jitterDefault jitterKind = iota // additive, DefaultJitterMax
	jitterNone
	jitterFull
	jitterEqual
	jitterDecorrelated
	jitterAdditive
	jitterProportional
)

var (
	// NoJitter uses the computed wait as it is: min(Initial*Multiplier^n, MaxDelay).
	// Many clients that failed together then retry in synchronized waves;
	// use it for tests and for a single client only.
	NoJitter = Jitter{kind: jitterNone}

	// FullJitter draws each wait uniformly from [0, d], where d is the capped
	// exponential wait. It spreads a herd the most and does the least total
	// work (Brooker, "Exponential Backoff And Jitter", AWS 2015).
	FullJitter = Jitter{kind: jitterFull}

	// EqualJitter draws each wait from [d/2, d]: half the wait is kept, half
	// is random.
	EqualJitter = Jitter{kind: jitterEqual}

	// DecorrelatedJitter makes each wait min(MaxDelay, U(Initial, 3*previous
	// wait)), with the previous wait starting at Initial (Brooker's
	// "decorrelated jitter"). It ignores Multiplier. Because the cap is
	// applied after the draw, once 3*previous passes MaxDelay many waits
	// equal MaxDelay exactly (about 2/3 of them when previous is the cap and
	// Initial is small).
	DecorrelatedJitter = Jitter{kind: jitterDecorrelated}
)

// AdditiveJitter adds a fresh uniform random duration in [0, max] to each
// computed wait and then caps the sum at MaxDelay: the published cloud
// guidance, min(2^n s + random_ms, maximum_backoff), is AdditiveJitter(time.Second).
// At the cap the jitter disappears, so clients that reach MaxDelay together
// stay together; prefer [FullJitter] for large fleets.
// AdditiveJitter(0) is the same as [NoJitter]. A negative max makes
// [Policy.Validate] fail.
func AdditiveJitter(max time.Duration) Jitter {
	return Jitter{kind: jitterAdditive, amount: max}
}

// ProportionalJitter multiplies each computed wait d by a fresh uniform
// factor in [1-fraction, 1+fraction] and caps the result at MaxDelay.
// ProportionalJitter(0.2) is gRPC's ±20% connection backoff jitter (gRPC
// itself lets jittered waits exceed its cap by 20%; this one does not).
// A fraction outside [0, 1] makes [Policy.Validate] fail.
func ProportionalJitter(fraction float64) Jitter {
	return Jitter{kind: jitterProportional, frac: fraction}
}

// String returns the jitter's name as the CLI spells it: "none", "full",
// "equal", "decorrelated", "additive:1s" or "proportional:0.2".
func (j Jitter) String() string {
	switch j.kind {
	case jitterDefault:
		return "additive:" + DefaultJitterMax.String()
	case jitterNone:
		return "none"
	case jitterFull:
		return "full"
	case jitterEqual:
		return "equal"
	case jitterDecorrelated:
		return "decorrelated"
	case jitterAdditive:
		return "additive:" + j.amount.String()
	case jitterProportional:
		return fmt.Sprintf("proportional:%g", j.frac)
	}
	return "invalid"
}

func (j Jitter) validate() error {
	switch j.kind {
	case jitterAdditive:
		if j.amount < 0 {
			return fmt.Errorf("%w: AdditiveJitter maximum %v is negative", ErrInvalidPolicy, j.amount)
		}
	case jitterProportional:
		if !(j.frac >= 0 && j.frac <= 1) {
			return fmt.Errorf("%w: ProportionalJitter fraction %v is outside [0, 1]", ErrInvalidPolicy, j.frac)
		}
	case jitterDefault, jitterNone, jitterFull, jitterEqual, jitterDecorrelated:
	default:
		return fmt.Errorf("%w: unknown Jitter", ErrInvalidPolicy)
	}
	return nil
}

// Bounds returns the smallest and largest wait the policy can choose before
// retry n (n = 0 for the first retry), given the jitter. For
// DecorrelatedJitter, whose waits depend on the previous one, it returns the
// widest range reachable at that retry. A negative n counts as 0, as in
// [Policy.Delay]. Every wait lies in the closed range [lo, hi]; the integer
// jitters can reach both ends, ProportionalJitter only lo (and hi at the cap).
// The policy must be valid; Bounds of an invalid policy is meaningless.
func (p Policy) Bounds(n int) (lo, hi time.Duration) {
	if p.Initial == Immediate {
		return 0, 0
	}
	n = max(n, 0)
	initial, maxDelay := p.initial(), p.maxDelay()
	d := p.base(n)
	switch p.Jitter.kind {
	case jitterNone:
		return d, d
	case jitterFull:
		return 0, d
	case jitterEqual:
		return d - d/2, d
	case jitterDecorrelated:
		// The widest range after n retries: [Initial, min(MaxDelay, Initial*3^(n+1))].
		return initial, mulCap(initial, math.Pow(3, float64(n)+1), maxDelay)
	case jitterProportional:
		return mulCap(d, 1-p.Jitter.frac, maxDelay), mulCap(d, 1+p.Jitter.frac, maxDelay)
	default:
		return d, addCap(d, p.jitterMax(), maxDelay)
	}
}

// Delay returns one wait before retry n (n = 0 for the first retry; a
// negative n counts as 0), drawn as [Do] draws it. prev is the wait chosen before the previous retry (0 for
// the first); only DecorrelatedJitter uses it. r is the random source; nil
// means the process-wide source of math/rand/v2, which is seeded from the
// operating system and safe for concurrent use without a global lock.
// Pass a seeded *rand.Rand for a reproducible schedule (the simulator does).
//
// The result is always in [0, MaxDelay] for every n, however large.
// The policy must be valid (see [Policy.Validate]).
func (p Policy) Delay(n int, prev time.Duration, r *rand.Rand) time.Duration {
	if p.Initial == Immediate {
		return 0
	}
	maxDelay := p.maxDelay()
	switch p.Jitter.kind {
	case jitterNone:
		return p.base(n)
	case jitterFull:
		return uniform(r, 0, p.base(n))
	case jitterEqual:
		d := p.base(n)
		return d - d/2 + uniform(r, 0, d/2)
	case jitterDecorrelated:
		// Brooker's formula as written: min(cap, U(Initial, 3*prev)). The
		// min() is applied after the draw, so when 3*prev passes the cap
		// the waits pile up at MaxDelay, as the study describes.
		initial := p.initial()
		prev = max(prev, initial)
		hi := time.Duration(math.MaxInt64)
		if prev <= math.MaxInt64/3 {
			hi = 3 * prev
		}
		return min(uniform(r, initial, hi), maxDelay)
	case jitterProportional:
		f := p.Jitter.frac
		if f == 0 {
			return p.base(n)
		}
		var u float64
		if r == nil {
			u = rand.Float64()
		} else {
			u = r.Float64()
		}
		return mulCap(p.base(n), 1-f+2*f*u, maxDelay)
	default:
		return addCap(p.base(n), uniform(r, 0, p.jitterMax()), maxDelay)
	}
}

// base returns min(Initial*Multiplier^n, MaxDelay) without overflow.
func (p Policy) base(n int) time.Duration {
	initial, maxDelay := p.initial(), p.maxDelay()
	if n <= 0 {
		return min(initial, maxDelay)
	}
	m := p.multiplier()
	if m == 2 && n < 63 {
		if initial <= maxDelay>>uint(n) {
			return initial << uint(n)
		}
		return maxDelay
	}
	return mulCap(initial, math.Pow(m, float64(n)), maxDelay)
}

// mulCap returns min(d*f, limit), clamped at zero, for d, limit >= 0.
// Inf and NaN products give limit.
func mulCap(d time.Duration, f float64, limit time.Duration) time.Duration {
	if f == 1 {
		return min(d, limit)
	}
	x := float64(d) * f
	if !(x < float64(limit)) { // also catches NaN and +Inf
		return limit
	}
	if x <= 0 {
		return 0
	}
	return time.Duration(x)
}

// addCap returns min(a+b, limit) for non-negative a, b, limit, without overflow.
func addCap(a, b, limit time.Duration) time.Duration {
	if b > limit-a {
		return limit
	}
	return a + b
}

// uniform returns a uniform duration in [lo, hi] (inclusive) for 0 <= lo <= hi.
func uniform(r *rand.Rand, lo, hi time.Duration) time.Duration {
	span := int64(hi - lo)
	if span <= 0 {
		return lo
	}
	if span < math.MaxInt64 {
		span++
	}
	if r == nil {
		return lo + time.Duration(rand.Int64N(span))
	}
	return lo + time.Duration(r.Int64N(span))
}
