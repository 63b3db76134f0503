package retry_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

var allJitters = []retry.Jitter{
	{}, retry.NoJitter(), retry.FullJitter(), retry.EqualJitter(), retry.DecorrelatedJitter(),
	retry.AdditiveJitter(0), retry.AdditiveJitter(time.Second), retry.AdditiveJitter(math.MaxInt64),
	retry.ProportionalJitter(0), retry.ProportionalJitter(0.2), retry.ProportionalJitter(1),
}

// attemptsToCheck covers every retry number up to 2000, a spread up to 10^6,
// and the extremes.
func attemptsToCheck() []int {
	var ns []int
	for n := 0; n <= 2000; n++ {
		ns = append(ns, n)
	}
	for n := 2001; n <= 1_000_000; n = n*3/2 + 7 {
		ns = append(ns, n)
	}
	return append(ns, 1_000_000, math.MaxInt32, math.MaxInt)
}

func randomPolicy(r *rand.Rand, j retry.Jitter) retry.Policy {
	durs := []time.Duration{1, time.Millisecond, time.Second, time.Hour, math.MaxInt64 / 3, math.MaxInt64}
	a := durs[r.IntN(len(durs))] + time.Duration(r.Int64N(1000))
	b := durs[r.IntN(len(durs))]
	if a < 0 {
		a = math.MaxInt64
	}
	if b < a {
		a, b = b, a
	}
	mults := []float64{1, 1.0001, 1.5, 1.6, 2, 3, 10, 1e10, math.Inf(1)}
	return retry.Policy{Initial: a, MaxDelay: b, Multiplier: mults[r.IntN(len(mults))], Jitter: j}
}

func TestEveryJitterStaysInBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ns := attemptsToCheck()
	for _, j := range allJitters {
		for trial := 0; trial < 20; trial++ {
			p := randomPolicy(r, j)
			if trial == 0 {
				p = retry.Policy{Jitter: j}
			}
			if err := p.Validate(); err != nil {
				t.Fatalf("%v: %v", p, err)
			}
			maxDelay := p.MaxDelay
			if maxDelay == 0 {
				maxDelay = retry.DefaultMaxDelay
			}
			var prev time.Duration
			for _, n := range ns {
				d := p.Delay(n, prev, r)
				lo, hi := p.Bounds(n)
				if d < 0 || d > maxDelay || d < lo || d > hi || lo < 0 || hi > maxDelay {
					t.Fatalf("jitter %v, policy %+v, retry %d: wait %v, bounds [%v, %v], cap %v", j, p, n, d, lo, hi, maxDelay)
				}
				prev = d
			}
		}
	}
}

func TestNoJitterGrowsMonotonicallyToTheCap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		p := randomPolicy(r, retry.NoJitter())
		var last time.Duration
		for _, n := range attemptsToCheck() {
			d := p.Delay(n, 0, nil)
			if d < last {
				t.Fatalf("%+v: wait %v at retry %d after %v: not monotone", p, d, n, last)
			}
			last = d
		}
		if p.Multiplier > 1.0001 && last != p.MaxDelay {
			t.Fatalf("%+v: last wait %v never reached the cap", p, last)
		}
	}
	// The cap is reached and held: 1, 2, 4, 8, 16, 32, 32, ...
	p := retry.Policy{Jitter: retry.NoJitter()}
	for n, want := range []time.Duration{1, 2, 4, 8, 16, 32, 32, 32} {
		if d := p.Delay(n, 0, nil); d != want*time.Second {
			t.Errorf("retry %d: %v, want %v", n, d, want*time.Second)
		}
	}
	if d := p.Delay(1_000_000, 0, nil); d != 32*time.Second {
		t.Errorf("retry 1e6: %v", d)
	}
}

func TestJitterDistributions(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const samples = 20000
	check := func(name string, p retry.Policy, n int, wantLo, wantHi time.Duration) {
		t.Helper()
		var sum float64
		seenLo, seenHi := time.Duration(math.MaxInt64), time.Duration(0)
		for i := 0; i < samples; i++ {
			d := p.Delay(n, 0, r)
			sum += float64(d)
			seenLo, seenHi = min(seenLo, d), max(seenHi, d)
		}
		mean := time.Duration(sum / samples)
		mid := (wantLo + wantHi) / 2
		span := wantHi - wantLo
		if seenLo < wantLo || seenHi > wantHi || seenLo > wantLo+span/50 || seenHi < wantHi-span/50 {
			t.Errorf("%s: samples in [%v, %v], want to cover [%v, %v]", name, seenLo, seenHi, wantLo, wantHi)
		}
		if diff := mean - mid; diff > span/50 || diff < -span/50 {
			t.Errorf("%s: mean %v, want about %v (uniform)", name, mean, mid)
		}
	}
	check("default additive", retry.Policy{}, 2, 4*time.Second, 5*time.Second)
	check("full", retry.Policy{Jitter: retry.FullJitter()}, 3, 0, 8*time.Second)
	check("equal", retry.Policy{Jitter: retry.EqualJitter()}, 3, 4*time.Second, 8*time.Second)
	check("proportional", retry.Policy{Jitter: retry.ProportionalJitter(0.2)}, 0, 800*time.Millisecond, 1200*time.Millisecond)
	// At the cap the seed formula's additive jitter vanishes: min(32s + r, 32s).
	if d := (retry.Policy{}).Delay(10, 0, r); d != 32*time.Second {
		t.Errorf("additive at the cap: %v", d)
	}
	// Decorrelated: U(Initial, 3*prev), capped.
	p := retry.Policy{Jitter: retry.DecorrelatedJitter(), Initial: 100 * time.Millisecond, MaxDelay: 10 * time.Second}
	for i := 0; i < 1000; i++ {
		if d := p.Delay(5, time.Second, r); d < 100*time.Millisecond || d > 3*time.Second {
			t.Fatalf("decorrelated after 1s: %v", d)
		}
	}
}

func TestDelaysIterator(t *testing.T) {
	p := retry.Policy{Initial: time.Second, Multiplier: 2, MaxDelay: 4 * time.Second, Jitter: retry.NoJitter(), MaxAttempts: 5}
	var got []string
	for n, d := range p.Delays() {
		got = append(got, fmt.Sprint(n, ":", d))
	}
	if s := strings.Join(got, " "); s != "1:1s 2:2s 3:4s 4:4s" {
		t.Errorf("Delays = %s", s)
	}
	// MaxElapsed ends the sequence when the waits alone would pass it.
	p.MaxAttempts, p.MaxElapsed = retry.Unlimited, 10*time.Second
	count := 0
	for range p.Delays() {
		count++
	}
	if count != 3 {
		t.Errorf("Delays with MaxElapsed 10s yielded %d waits, want 3 (1+2+4)", count)
	}
	// Unlimited without a budget is endless: break works.
	p.MaxElapsed = 0
	count = 0
	for range p.Delays() {
		if count++; count == 1000 {
			break
		}
	}
	if count != 1000 {
		t.Errorf("unlimited Delays stopped after %d", count)
	}
	// Default policy: MaxAttempts-1 waits.
	count = 0
	for range (retry.Policy{}).Delays() {
		count++
	}
	if count != retry.DefaultMaxAttempts-1 {
		t.Errorf("default Delays yielded %d", count)
	}
	// Invalid policy yields nothing.
	for range (retry.Policy{Multiplier: 0.1}).Delays() {
		t.Fatal("invalid policy yielded a wait")
	}
}

// TestJitterSeededFromOS runs two fresh processes and checks that they draw
// different jitter: a clock-seeded source would repeat within a second.
func TestJitterSeededFromOS(t *testing.T) {
	if os.Getenv("RETRYKIT_PRINT_JITTER") == "1" {
		var b strings.Builder
		for n, d := range (retry.Policy{Jitter: retry.FullJitter(), MaxAttempts: 20}).Delays() {
			fmt.Fprint(&b, n, ":", d.Nanoseconds(), " ")
		}
		fmt.Println("JITTER", b.String())
		return
	}
	run := func() string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestJitterSeededFromOS$")
		cmd.Env = append(os.Environ(), "RETRYKIT_PRINT_JITTER=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "JITTER ") {
				return line
			}
		}
		t.Fatalf("child printed no jitter:\n%s", out)
		return ""
	}
	a, b := run(), run()
	if a == b {
		t.Fatalf("two processes drew the same jitter: %s", a)
	}
}

// Random jitter parameters (proportional fractions, additive maxima) over
// huge and tiny policies: every wait within Bounds and [0, MaxDelay].
func TestRandomJitterParametersStayInBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	ns := attemptsToCheck()
	for trial := 0; trial < 300; trial++ {
		var j retry.Jitter
		if trial%2 == 0 {
			j = retry.ProportionalJitter(r.Float64())
		} else {
			j = retry.AdditiveJitter(time.Duration(r.Int64N(math.MaxInt64)) >> r.IntN(63))
		}
		p := randomPolicy(r, j)
		if err := p.Validate(); err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		for _, n := range ns[r.IntN(50):] {
			d := p.Delay(n, 0, r)
			lo, hi := p.Bounds(n)
			if d < lo || d > hi || lo < 0 || hi > p.MaxDelay {
				t.Fatalf("%v, %+v, retry %d: wait %v outside [%v, %v] or cap %v", j, p, n, d, lo, hi, p.MaxDelay)
			}
		}
	}
}

// Waits near the int64 limit neither overflow nor wrap to negative or zero.
func TestHugeDurationsDoNotOverflow(t *testing.T) {
	for _, j := range allJitters {
		for _, p := range []retry.Policy{
			{Initial: math.MaxInt64, MaxDelay: math.MaxInt64, Jitter: j},
			{Initial: math.MaxInt64 / 2, MaxDelay: math.MaxInt64, Multiplier: 3, Jitter: j},
			{Initial: math.MaxInt64 - 1, MaxDelay: math.MaxInt64, Multiplier: 1, Jitter: j},
			{Initial: time.Hour, MaxDelay: math.MaxInt64, Multiplier: math.Inf(1), Jitter: j},
			{Initial: 1, MaxDelay: math.MaxInt64, Multiplier: 1.0000001, Jitter: j},
		} {
			var prev time.Duration
			for _, n := range []int{0, 1, 2, 62, 63, 64, 1000, 1_000_000, math.MaxInt32, math.MaxInt} {
				d := p.Delay(n, prev, nil)
				lo, hi := p.Bounds(n)
				if d < 0 || d < lo || d > hi {
					t.Fatalf("%v %+v retry %d: wait %v, bounds [%v, %v]", j, p, n, d, lo, hi)
				}
				if d == 0 && lo > 0 {
					t.Fatalf("%v %+v retry %d: zero wait", j, p, n)
				}
				prev = d
			}
		}
	}
}

// Jitter bounds are inclusive at both ends where the range is tiny: the
// sampled set covers both the lowest and the highest value.
func TestJitterBoundsInclusive(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, tc := range []struct {
		p      retry.Policy
		n      int
		lo, hi time.Duration
	}{
		{retry.Policy{Initial: 2, MaxDelay: 2, Jitter: retry.FullJitter()}, 0, 0, 2},
		{retry.Policy{Initial: 4, MaxDelay: 4, Jitter: retry.EqualJitter()}, 0, 2, 4},
		{retry.Policy{Initial: 3, MaxDelay: 100, Jitter: retry.AdditiveJitter(2), Multiplier: 1}, 5, 3, 5},
		{retry.Policy{Initial: 1, MaxDelay: 100, Jitter: retry.DecorrelatedJitter()}, 0, 1, 3},
	} {
		seen := map[time.Duration]bool{}
		for range 1000 {
			d := tc.p.Delay(tc.n, 0, r)
			if d < tc.lo || d > tc.hi {
				t.Fatalf("%v: %v outside [%v, %v]", tc.p.Jitter, d, tc.lo, tc.hi)
			}
			seen[d] = true
		}
		if int64(len(seen)) != int64(tc.hi-tc.lo)+1 {
			t.Errorf("%v: drew %d distinct waits, want all %d of [%v, %v]", tc.p.Jitter, len(seen), tc.hi-tc.lo+1, tc.lo, tc.hi)
		}
		if lo, hi := tc.p.Bounds(tc.n); lo != tc.lo || hi != tc.hi {
			t.Errorf("%v: Bounds = [%v, %v], want [%v, %v]", tc.p.Jitter, lo, hi, tc.lo, tc.hi)
		}
	}
}

// Decorrelated jitter follows its chain: each wait in [Initial, 3*prev],
// capped, and the chain reaches the cap.
func TestDecorrelatedChain(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	p := retry.Policy{Initial: 10 * time.Millisecond, MaxDelay: 2 * time.Second, Jitter: retry.DecorrelatedJitter()}
	prev, top := time.Duration(0), time.Duration(0)
	for n := range 10000 {
		d := p.Delay(n, prev, r)
		hi := min(3*max(prev, p.Initial), p.MaxDelay)
		if d < p.Initial || d > hi {
			t.Fatalf("retry %d after %v: %v outside [%v, %v]", n, prev, d, p.Initial, hi)
		}
		prev, top = d, max(top, d)
	}
	if top < p.MaxDelay*9/10 {
		t.Errorf("chain never came near the cap: max %v", top)
	}
	// Immediate: no waits, whatever the jitter.
	for _, j := range allJitters {
		q := retry.Policy{Initial: retry.Immediate, Jitter: j}
		if d := q.Delay(5, time.Second, r); d != 0 {
			t.Errorf("Immediate %v: %v", j, d)
		}
		if lo, hi := q.Bounds(5); lo != 0 || hi != 0 {
			t.Errorf("Immediate %v: Bounds [%v, %v]", j, lo, hi)
		}
	}
}

func TestNegativeRetryNumberCountsAsZero(t *testing.T) {
	for _, j := range allJitters {
		p := retry.Policy{Jitter: j, Initial: time.Second, MaxDelay: time.Minute}
		for _, n := range []int{-1, -5, math.MinInt} {
			lo, hi := p.Bounds(n)
			lo0, hi0 := p.Bounds(0)
			if lo != lo0 || hi != hi0 {
				t.Errorf("%v: Bounds(%d) = [%v, %v], want Bounds(0) = [%v, %v]", j, n, lo, hi, lo0, hi0)
			}
			if d := p.Delay(n, 0, nil); d < lo0 || d > hi0 {
				t.Errorf("%v: Delay(%d) = %v outside [%v, %v]", j, n, d, lo0, hi0)
			}
		}
	}
}

// Decorrelated jitter is min(cap, U(Initial, 3*prev)): below the cap it is
// uniform, and when 3*prev passes the cap the excess piles up at MaxDelay.
func TestDecorrelatedDistribution(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	p := retry.Policy{Jitter: retry.DecorrelatedJitter(), Initial: time.Second, MaxDelay: 10 * time.Second}
	const samples = 20000
	atCap := 0
	var sum float64
	for range samples {
		d := p.Delay(3, 10*time.Second, r) // U(1 s, 30 s), capped at 10 s
		if d < time.Second || d > 10*time.Second {
			t.Fatalf("wait %v outside [1s, 10s]", d)
		}
		if d == 10*time.Second {
			atCap++
		}
		d2 := p.Delay(3, 2*time.Second, r) // U(1 s, 6 s): never capped
		if d2 < time.Second || d2 > 6*time.Second {
			t.Fatalf("wait %v outside [1s, 6s]", d2)
		}
		sum += d2.Seconds()
	}
	// P(wait = cap) = (30-10)/(30-1) = 0.69.
	if f := float64(atCap) / samples; f < 0.66 || f > 0.72 {
		t.Errorf("%.3f of the waits at the cap, want about 0.69", f)
	}
	if mean := sum / samples; mean < 3.4 || mean > 3.6 {
		t.Errorf("mean of U(1s, 6s) = %.2fs, want about 3.5s", mean)
	}
	// Huge prev saturates instead of overflowing.
	q := retry.Policy{Jitter: retry.DecorrelatedJitter(), Initial: time.Second, MaxDelay: math.MaxInt64}
	for range 100 {
		if d := q.Delay(0, math.MaxInt64/2, r); d < time.Second {
			t.Fatalf("huge prev: %v", d)
		}
	}
}

// constSource always returns the largest value, so that a bounded draw
// returns its maximum.
type constSource struct{}

func (constSource) Uint64() uint64 { return math.MaxUint64 }

// Bounds: "Every wait lies in the closed range [lo, hi]"; doc.go: "for any
// Initial, Multiplier and MaxDelay up to the int64 limit". The decorrelated
// upper bound was computed in float64 (Initial × 3^(n+1)), which rounds
// below the integer 3 × previous wait that Delay draws up to once the
// product passes 2^53 ns (104 days): Delay returned waits above Bounds' hi.
func TestDecorrelatedBoundsHoldTheLargestWait(t *testing.T) {
	p := retry.Policy{Initial: 1<<53 + 1, MaxDelay: math.MaxInt64, Jitter: retry.DecorrelatedJitter()}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	r := rand.New(constSource{})
	var prev time.Duration
	for n := range 5 {
		d := p.Delay(n, prev, r)
		if lo, hi := p.Bounds(n); d < lo || d > hi {
			t.Fatalf("retry %d: Delay %d outside Bounds [%d, %d]", n, d, lo, hi)
		}
		prev = d
	}
	// The float bound was right below 2^53 ns, and must stay so.
	q := retry.Policy{Initial: time.Millisecond, MaxDelay: time.Hour, Jitter: retry.DecorrelatedJitter()}
	for n := range 20 {
		_, hi := q.Bounds(n)
		want := min(time.Duration(float64(time.Millisecond)*math.Pow(3, float64(n+1))), time.Hour)
		if hi != want {
			t.Fatalf("Bounds(%d) hi %v, want %v", n, hi, want)
		}
	}
}
