package retry_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
)

// referenceDelay is Policy.Delay written from its documentation, with
// math/rand/v2's own bounded draw (r.Int64N) and without any of Delay's
// shortcuts: d = min(Initial*Multiplier^n, MaxDelay) (taken from NoJitter),
// then min(a + U[0, w], MaxDelay) for each jitter's a and w, drawing nothing
// when the jitter cannot change the wait.
func referenceDelay(p retry.Policy, n int, prev time.Duration, r *rand.Rand) time.Duration {
	if p.Initial == retry.Immediate {
		return 0
	}
	initial, maxDelay := p.Initial, p.MaxDelay
	if initial == 0 {
		initial = retry.DefaultInitial
	}
	if maxDelay == 0 {
		maxDelay = retry.DefaultMaxDelay
	}
	q := p
	q.Jitter = retry.NoJitter()
	d := q.Delay(n, 0, nil)
	var a, w time.Duration
	switch j := p.Jitter; {
	case j == retry.Jitter{}:
		a, w = d, min(retry.DefaultJitterMax, initial)
	case j == retry.NoJitter():
		return d
	case j == retry.FullJitter():
		w = d
	case j == retry.EqualJitter():
		a, w = d-d/2, d/2
	case j == retry.DecorrelatedJitter():
		prev = max(prev, initial)
		hi := time.Duration(math.MaxInt64)
		if prev <= math.MaxInt64/3 {
			hi = 3 * prev
		}
		a, w = initial, hi-initial
	default: // "additive:MAX" or "proportional:F", as String spells them (both round-trip exactly)
		kind, arg, _ := strings.Cut(j.String(), ":")
		if kind == "additive" {
			amount, err := time.ParseDuration(arg)
			if err != nil {
				panic(err)
			}
			a, w = d, amount
			break
		}
		f, err := strconv.ParseFloat(arg, 64)
		if err != nil {
			panic(err)
		}
		if f == 0 {
			return d
		}
		factor := 1 - f + 2*f*r.Float64()
		if factor == 1 {
			// d times exactly 1 is d, also above 2^53 ns, where float64(d)
			// would round it (a tiny fraction rounds the factor to 1).
			return min(d, maxDelay)
		}
		x := float64(d) * factor
		if !(x < float64(maxDelay)) {
			return maxDelay
		}
		return time.Duration(max(x, 0))
	}
	if w <= 0 || a >= maxDelay {
		return min(a, maxDelay)
	}
	var u time.Duration
	if w == math.MaxInt64 { // beyond Int64N's range: U[0, 2^63-1] from the low 63 bits, as Int64N takes a power of two
		u = time.Duration(r.Uint64() & math.MaxInt64)
	} else {
		u = time.Duration(r.Int64N(int64(w) + 1))
	}
	if u > maxDelay-a {
		return maxDelay
	}
	return a + u
}

// TestDelayDrawsAsInt64N checks that Delay with a seeded source returns
// exactly what the documented formula gives with math/rand/v2's Int64N on an
// identically seeded source, for every jitter, retry numbers up to MaxInt
// and random policies (huge durations and multipliers included): the draw
// is unbiased because Int64N's is, and seeded schedules are reproducible.
// AdditiveJitter(1<<62) makes the draw's rejection branch common (about one
// draw in four is redrawn).
func TestDelayDrawsAsInt64N(t *testing.T) {
	jitters := append([]retry.Jitter{retry.AdditiveJitter(1 << 62)}, allJitters...)
	pick := rand.New(rand.NewPCG(7, 8))
	ns := attemptsToCheck()
	for _, j := range jitters {
		for trial := 0; trial < 20; trial++ {
			p := randomPolicy(pick, j)
			switch trial {
			case 0:
				p = retry.Policy{Jitter: j}
			case 1:
				p = retry.Policy{Jitter: j, Initial: time.Nanosecond, MaxDelay: math.MaxInt64}
			}
			seed := pick.Uint64()
			r1 := rand.New(rand.NewPCG(seed, 1))
			r2 := rand.New(rand.NewPCG(seed, 1))
			var prev time.Duration
			for _, n := range ns {
				got, want := p.Delay(n, prev, r1), referenceDelay(p, n, prev, r2)
				if got != want {
					t.Fatalf("jitter %v, policy %+v, retry %d, prev %v: Delay %v, reference %v", j, p, n, prev, got, want)
				}
				prev = got
			}
			if r1.Uint64() != r2.Uint64() {
				t.Fatalf("jitter %v, policy %+v: the sources drifted apart", j, p)
			}
		}
	}
}

// TestDelayAtTheCapDrawsNothing: once the additive jitter cannot change the
// wait (the exponential has reached MaxDelay), no random number is used, so
// a seeded source is left as it was.
func TestDelayAtTheCapDrawsNothing(t *testing.T) {
	for _, j := range []retry.Jitter{{}, retry.AdditiveJitter(time.Second)} {
		p := retry.Policy{Jitter: j}
		r := rand.New(rand.NewPCG(1, 1))
		ref := rand.New(rand.NewPCG(1, 1))
		for n := 5; n < 100; n++ { // 2^5 s = 32 s = DefaultMaxDelay
			if d := p.Delay(n, 0, r); d != retry.DefaultMaxDelay {
				t.Fatalf("%v retry %d: %v", j, n, d)
			}
		}
		if r.Uint64() != ref.Uint64() {
			t.Errorf("%v: waits at the cap consumed random numbers", j)
		}
	}
}

// TestDefaultJitterScalesWithInitial: the zero Jitter adds uniform
// 0..min(1 s, Initial). At the reference Initial of 1 s that is exactly the
// published formula min(2^n s + U[0, 1000 ms], 32 s), both ends reached; with
// Initial 10 ms the first wait is 10..20 ms, not up to a second.
func TestDefaultJitterScalesWithInitial(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const samples = 20000
	for _, tc := range []struct {
		initial  time.Duration
		maxDelay time.Duration
		n        int
		lo, hi   time.Duration
	}{
		{0, 0, 0, time.Second, 2 * time.Second},                                                             // the reference
		{time.Second, 0, 2, 4 * time.Second, 5 * time.Second},                                               // the reference, retry 3
		{time.Second, 0, 4, 16 * time.Second, 17 * time.Second},                                             // below the cap
		{0, 0, 5, 32 * time.Second, 32 * time.Second},                                                       // at the cap the jitter vanishes
		{5 * time.Second, time.Minute, 0, 5 * time.Second, 6 * time.Second},                                 // Initial above 1 s: still 1 s
		{10 * time.Millisecond, 0, 0, 10 * time.Millisecond, 20 * time.Millisecond},                         // scaled down
		{10 * time.Millisecond, 0, 3, 80 * time.Millisecond, 90 * time.Millisecond},                         // jitter stays at most Initial
		{time.Millisecond, 0, 0, time.Millisecond, 2 * time.Millisecond},                                    // scaled down
		{250 * time.Millisecond, 300 * time.Millisecond, 0, 250 * time.Millisecond, 300 * time.Millisecond}, // capped
		{time.Nanosecond, 0, 0, time.Nanosecond, 2 * time.Nanosecond},
	} {
		p := retry.Policy{Initial: tc.initial, MaxDelay: tc.maxDelay}
		if lo, hi := p.Bounds(tc.n); lo != tc.lo || hi != tc.hi {
			t.Errorf("Initial %v retry %d: Bounds [%v, %v], want [%v, %v]", tc.initial, tc.n, lo, hi, tc.lo, tc.hi)
		}
		seenLo, seenHi := time.Duration(math.MaxInt64), time.Duration(0)
		for range samples {
			d := p.Delay(tc.n, 0, r)
			seenLo, seenHi = min(seenLo, d), max(seenHi, d)
		}
		// Every sample lies in [lo, hi], and the samples reach within 0.1 % of
		// the range of each end (a range of 2 ns has 3 values, all seen).
		slack := (tc.hi - tc.lo) / 1000
		if seenLo < tc.lo || seenHi > tc.hi || seenLo > tc.lo+slack || seenHi < tc.hi-slack {
			t.Errorf("Initial %v retry %d: waits in [%v, %v], want [%v, %v]", tc.initial, tc.n, seenLo, seenHi, tc.lo, tc.hi)
		}
	}
}

// TestDoWithSmallInitialWaitsLittle: Do with Initial 10 ms and the zero
// Jitter waits 10..20, 20..30 and 40..50 ms before retries 1..3, so the
// call takes 70..100 ms of (synctest) time; before the default jitter
// scaled with Initial it took up to 3.07 s.
func TestDoWithSmallInitialWaitsLittle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for range 50 {
			start := time.Now()
			calls := 0
			err := retry.Do(context.Background(), retry.Policy{Initial: 10 * time.Millisecond, MaxAttempts: 4},
				func(context.Context) error {
					calls++
					return errors.New("transient")
				})
			if elapsed := time.Since(start); elapsed < 70*time.Millisecond || elapsed > 100*time.Millisecond || calls != 4 || err == nil {
				t.Fatalf("%d calls in %v (%v), want 4 in 70..100ms", calls, elapsed, err)
			}
		}
	})
}

// TestImmediateValidation: a policy with Initial: Immediate keeps Do's
// success path free of allocations and its waits zero, and invalid fields
// beside it are still reported (the fast validity check, which accepts
// Immediate, must not let them through).
func TestImmediateValidation(t *testing.T) {
	p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 4}
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	if a := testing.AllocsPerRun(100, func() { _ = retry.Do(ctx, p, op) }); a != 0 {
		t.Errorf("Do with Immediate allocates %v times per call", a)
	}
	for _, bad := range []retry.Policy{
		{Initial: retry.Immediate, MaxDelay: -1},
		{Initial: retry.Immediate, MaxElapsed: -1},
		{Initial: retry.Immediate, AttemptTimeout: -1},
		{Initial: retry.Immediate, MaxAttempts: -2},
		{Initial: retry.Immediate, Multiplier: 0.5},
		{Initial: retry.Immediate, Jitter: retry.AdditiveJitter(-1)},
		{Initial: -2},
	} {
		if err := retry.Do(ctx, bad, op); !errors.Is(err, retry.ErrInvalidPolicy) {
			t.Errorf("%+v: Do returned %v, want ErrInvalidPolicy", bad, err)
		}
	}
	for n := range 100 {
		if d := p.Delay(n, time.Second, nil); d != 0 {
			t.Fatalf("Immediate: Delay(%d) = %v", n, d)
		}
	}
}
