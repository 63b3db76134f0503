package retry

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"time"
)

// Jitter says how a computed wait is randomised so that many clients that
// failed together do not retry together.
//
// The zero Jitter is the reference behaviour: each wait gets a fresh
// uniform random duration in [0, min(DefaultJitterMax, Initial)] added
// before it is capped at the policy's MaxDelay. At the reference Initial of
// 1 s (or any Initial of at least 1 s) that is the published 0..1000 ms,
// exactly [AdditiveJitter](time.Second); a smaller Initial scales the
// jitter down with it, so that Initial 10 ms waits 10..20 ms before the
// first retry, not up to a second. Jitter values are comparable, immutable
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
	jitterDefault jitterKind = iota // additive, min(DefaultJitterMax, Initial)
	jitterNone
	jitterFull
	jitterEqual
	jitterDecorrelated
	jitterAdditive
	jitterProportional
)

// NoJitter uses the computed wait as it is: min(Initial*Multiplier^n,
// MaxDelay). Many clients that failed together then retry in synchronized
// waves; use it for tests and for a single client only.
func NoJitter() Jitter { return Jitter{kind: jitterNone} }

// FullJitter draws each wait uniformly from [0, d], where d is the capped
// exponential wait. It spreads a herd the most and does the least total work
// (Brooker, "Exponential Backoff And Jitter", AWS 2015).
func FullJitter() Jitter { return Jitter{kind: jitterFull} }

// EqualJitter draws each wait from [d/2, d]: half the wait is kept, half is
// random.
func EqualJitter() Jitter { return Jitter{kind: jitterEqual} }

// DecorrelatedJitter makes each wait min(MaxDelay, U(Initial, 3*previous
// wait)), with the previous wait starting at Initial (Brooker's "decorrelated
// jitter"). It ignores Multiplier. Because the cap is applied after the draw,
// once 3*previous passes MaxDelay many waits equal MaxDelay exactly (about
// 2/3 of them when previous is the cap and Initial is small).
func DecorrelatedJitter() Jitter { return Jitter{kind: jitterDecorrelated} }

// AdditiveJitter adds a fresh uniform random duration in [0, max] to each
// computed wait and then caps the sum at MaxDelay: the published cloud
// guidance, min(2^n s + random_ms, maximum_backoff), is AdditiveJitter(time.Second).
// Unlike the zero Jitter, whose maximum is min(DefaultJitterMax, Initial),
// max stays fixed whatever Initial is. At the cap the jitter disappears, so
// clients that reach MaxDelay together stay together; prefer [FullJitter]
// for large fleets. AdditiveJitter(0) is the same as [NoJitter]. A negative
// max makes [Policy.Validate] fail.
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
// "equal", "decorrelated", "additive:1s" (AdditiveJitter(time.Second)),
// "proportional:0.2", or "additive" for the zero Jitter, whose maximum,
// min(DefaultJitterMax, Initial), depends on the policy.
func (j Jitter) String() string {
	switch j.kind {
	case jitterDefault:
		return "additive"
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
	return p.bounds(n)
}

// bounds is [Policy.Bounds] on a pointer, so that callers inside the
// package do not copy the Policy.
func (p *Policy) bounds(n int) (lo, hi time.Duration) {
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
		// The widest range after n retries: [Initial, min(MaxDelay,
		// Initial*3^(n+1))], in integers as Delay draws (3 × the previous
		// wait): a float product rounds below it past 2^53 ns. At most 40
		// steps, as Initial >= 1 ns.
		hi := initial
		for i := 0; i <= n && hi < maxDelay; i++ {
			if hi > maxDelay/3 {
				hi = maxDelay
			} else {
				hi *= 3
			}
		}
		return initial, hi
	case jitterProportional:
		return mulCap(d, 1-p.Jitter.frac, maxDelay), mulCap(d, 1+p.Jitter.frac, maxDelay)
	default:
		return d, addCap(d, p.jitterMax(), maxDelay)
	}
}

// Delay returns one wait before retry n (n = 0 for the first retry; a
// negative n counts as 0), drawn as [Do] draws it. prev is the wait chosen
// before the previous retry (0 for the first); only DecorrelatedJitter uses
// it. r is the random source; nil means the process-wide source of
// math/rand/v2, which is seeded from the operating system and safe for
// concurrent use without a global lock. Pass a seeded *rand.Rand for a
// reproducible schedule (the simulator does): the same policy, arguments
// and source state give the same wait, and each bounded draw consumes the
// source exactly as r.Int64N does.
//
// The result is always in [0, MaxDelay] for every n, however large.
// The policy must be valid (see [Policy.Validate]).
func (p Policy) Delay(n int, prev time.Duration, r *rand.Rand) time.Duration {
	return p.delay(n, prev, r)
}

// delay is [Policy.Delay] on a pointer, so that the 128-byte Policy is
// not copied again. It is written for speed (profiled): the exponential and
// the one bounded random draw are spelled out here rather than called, as
// the compiler would not inline them, and the reference jitter is tested
// first. Every jitter but ProportionalJitter is min(a + U[0, w], MaxDelay)
// for its own a and w, so there is one draw site.
func (p *Policy) delay(n int, prev time.Duration, r *rand.Rand) time.Duration {
	initial, maxDelay, kind := p.Initial, p.maxDelay(), p.Jitter.kind
	if initial <= 0 {
		if initial == Immediate {
			return 0
		}
		initial = DefaultInitial
	}
	// d = min(Initial*Multiplier^n, MaxDelay): a shift for the default
	// doubling, else baseSlow; DecorrelatedJitter has no use for it.
	var d time.Duration
	if p.doubles() {
		d = maxDelay // from retry 63 on, as Initial >= 1 ns
		if uint(n) < 63 {
			if initial <= maxDelay>>uint(n) {
				d = initial << uint(n)
			}
		} else if n < 0 {
			d = initial // Initial <= MaxDelay
		}
		if kind == jitterNone {
			return d
		}
	} else if kind != jitterDecorrelated {
		d = p.baseSlow(n)
	}
	var a, w time.Duration // the wait is min(a + U[0, w], MaxDelay), a, w >= 0
	switch {
	case kind == jitterDefault:
		a, w = d, min(DefaultJitterMax, initial)
	case kind == jitterNone:
		return d
	case kind == jitterAdditive:
		a, w = d, p.Jitter.amount
	case kind == jitterFull:
		w = d
	case kind == jitterEqual:
		a, w = d-d/2, d/2
	case kind == jitterDecorrelated:
		// Brooker's formula as written: min(cap, U(Initial, 3*prev)). The
		// min() is applied after the draw, so when 3*prev passes the cap
		// the waits pile up at MaxDelay, as the study describes.
		prev = max(prev, initial)
		hi := time.Duration(math.MaxInt64)
		if prev <= math.MaxInt64/3 {
			hi = 3 * prev
		}
		a, w = initial, hi-initial
	default: // jitterProportional
		f := p.Jitter.frac
		if f == 0 {
			return d
		}
		var u float64
		if r == nil {
			u = rand.Float64()
		} else {
			u = r.Float64()
		}
		return mulCap(d, 1-f+2*f*u, maxDelay)
	}
	if w <= 0 || a >= maxDelay {
		// The jitter cannot change the wait (at the cap the additive
		// jitters vanish, as the published formula's min() says), so no
		// random number is drawn.
		return min(a, maxDelay)
	}
	// u uniform in [0, w], drawn exactly as r.Int64N(w+1) would draw it
	// (the same values from the same source state, tested), so that seeded
	// schedules stay reproducible: Lemire's multiply-and-reject method, the
	// high word of x*m, rejecting the rare x whose low word falls below
	// 2^64 mod m, so every result is equally likely. Unlike Int64N it calls
	// the runtime generator directly, not through the Source interface, and
	// it includes w = MaxInt64 (m = 2^63). The rejection loop, taken with
	// probability below m/2^64, is out of line.
	m := uint64(w) + 1 // at most 2^63
	var x uint64
	if r == nil {
		x = rand.Uint64()
	} else {
		x = r.Uint64()
	}
	var u uint64
	if m&(m-1) == 0 {
		u = x & (m - 1)
	} else {
		var lo uint64
		u, lo = bits.Mul64(x, m)
		if lo < m {
			u = randReject(r, m, u, lo)
		}
	}
	return addCap(a, time.Duration(u), maxDelay)
}

// base returns min(Initial*Multiplier^n, MaxDelay) without overflow, for a
// policy whose Initial is not Immediate; a negative n counts as 0. The
// default doubling is a shift.
func (p *Policy) base(n int) time.Duration {
	if !p.doubles() {
		return p.baseSlow(n)
	}
	initial, maxDelay := p.initial(), p.maxDelay()
	if n < 63 {
		n = max(n, 0)
		if initial <= maxDelay>>uint(n) {
			return initial << uint(n)
		}
	}
	return maxDelay // from retry 63 on, as Initial >= 1 ns
}

// doubles reports whether the wait doubles per retry (Multiplier 0 or 2),
// comparing bits rather than floats, which is cheaper. A Multiplier of -0.0,
// equal to 0 as a float, takes baseSlow's path: the same waits up to 2^53
// ns; above that, float arithmetic may round them (within bounds).
func (p *Policy) doubles() bool {
	m := math.Float64bits(p.Multiplier)
	return m == 0 || m == 1<<62
}

// baseSlow is base for any multiplier and retry number.
func (p *Policy) baseSlow(n int) time.Duration {
	initial, maxDelay := p.initial(), p.maxDelay()
	if n <= 0 {
		return min(initial, maxDelay)
	}
	return mulCap(initial, math.Pow(p.multiplier(), float64(n)), maxDelay)
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

// randReject finishes the draw in [Policy.delay] when the first draw's low
// word fell below n: it redraws while the low word is below 2^64 mod n.
func randReject(r *rand.Rand, n, hi, lo uint64) uint64 {
	thresh := -n % n
	for lo < thresh {
		var x uint64
		if r == nil {
			x = rand.Uint64()
		} else {
			x = r.Uint64()
		}
		hi, lo = bits.Mul64(x, n)
	}
	return hi
}
