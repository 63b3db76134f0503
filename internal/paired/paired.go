// Package paired compares the time of two ways of doing one thing on a
// noisy machine, for benchmarks whose difference is far smaller than the
// machine's drift (a hook of 100 ns on a 50 µs round trip, on shared
// cores). Run separately, as go test -count runs them, the two would meet
// different moments of the machine; here each round runs blocks of base
// and variant calls in the pattern ABBA BAAB, so that a slow moment slows
// both alike, a steady drift cancels exactly, and neither gains from its
// place in the round, and the result is the median of the per-round ratios
// with a distribution-free 95 % confidence interval. Standard library only.
package paired

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Result is what Measure found.
type Result struct {
	// Rounds is the number of rounds, Block the calls of each function per
	// round.
	Rounds, Block int
	// Base and Variant are the median time of one call of each, over the
	// rounds.
	Base, Variant time.Duration
	// Ratio is the median over the rounds of variant time / base time (the
	// four blocks of each in the round); Lo
	// and Hi bound a 95 % confidence interval of that median (the order
	// statistics around the middle rank that cover it with probability at
	// least 0.95, whatever the distribution of the ratios).
	Ratio, Lo, Hi float64
}

// Overhead returns Ratio-1, Lo-1 and Hi-1 in percent.
func (r Result) Overhead() (pct, lo, hi float64) {
	return 100 * (r.Ratio - 1), 100 * (r.Lo - 1), 100 * (r.Hi - 1)
}

// String reports r in one line, for a benchmark's or a test's log.
func (r Result) String() string {
	pct, lo, hi := r.Overhead()
	return fmt.Sprintf("variant/base = %.4f (%+.2f %%, 95 %% CI %+.2f %% .. %+.2f %%); base %v, variant %v per call; %d rounds of %d calls",
		r.Ratio, pct, lo, hi, r.Base, r.Variant, r.Rounds, r.Block)
}

// Measure runs rounds rounds of eight blocks of block calls each (base,
// variant, variant, base, variant, base, base, variant), and compares base
// and variant. rounds must be at least 10 and
// block at least 1.
func Measure(rounds, block int, base, variant func()) Result {
	start := time.Now()
	return measure(rounds, block, base, variant, func() time.Duration { return time.Since(start) })
}

// order is the blocks of one round, true for variant: ABBA then BAAB, so
// that each side runs once in every position of the pattern (a machine
// that is slower for the second of two blocks in a row, or in the middle
// of a round, slows both alike) and the mean position of each is the same
// (a steady drift cancels).
var order = [8]bool{false, true, true, false, true, false, false, true}

func measure(rounds, block int, base, variant func(), now func() time.Duration) Result {
	if rounds < 10 || block < 1 {
		panic(fmt.Sprintf("paired: %d rounds of %d calls: want at least 10 rounds of 1 call", rounds, block))
	}
	run := func(f func()) time.Duration {
		t := now()
		for range block {
			f()
		}
		return now() - t
	}
	ratios := make([]float64, rounds)
	tb := make([]time.Duration, rounds)
	tv := make([]time.Duration, rounds)
	for i := range rounds {
		var sb, sv time.Duration
		for _, f := range order {
			if f {
				sv += run(variant)
			} else {
				sb += run(base)
			}
		}
		tb[i], tv[i] = sb/4, sv/4
		ratios[i] = float64(sv) / float64(max(sb, 1))
	}
	slices.Sort(ratios)
	slices.Sort(tb)
	slices.Sort(tv)
	lo, hi := medianInterval(rounds)
	return Result{
		Rounds: rounds, Block: block,
		Base:    tb[rounds/2] / time.Duration(block),
		Variant: tv[rounds/2] / time.Duration(block),
		Ratio:   median(ratios),
		Lo:      ratios[lo], Hi: ratios[hi],
	}
}

func median(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// medianInterval returns the 0-based ranks j < k of the order statistics
// that bound a confidence interval of at least 95 % for the median of n
// samples: the smallest symmetric pair with P(j < B <= k) >= 0.95 for B
// binomial(n, 1/2), computed exactly.
func medianInterval(n int) (j, k int) {
	// p[i] = P(B = i), in logs to stay finite for large n.
	p := make([]float64, n+1)
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x) + 1); return v }
	for i := range p {
		p[i] = math.Exp(lg(n) - lg(i) - lg(n-i) - float64(n)*math.Ln2)
	}
	// Widen from the middle until the mass between the bounds is >= 0.95:
	// the interval [s(j), s(k)] (0-based) covers the median when at least
	// j+1 and at most k samples fall below it.
	for d := 0; ; d++ {
		j, k = (n-1)/2-d, n/2+d
		if j < 0 || k >= n {
			return 0, n - 1
		}
		mass := 0.0
		for i := j + 1; i <= k; i++ {
			mass += p[i]
		}
		if mass >= 0.95 {
			return j, k
		}
	}
}

// Reporter is the part of *testing.B that Report uses.
type Reporter interface {
	ReportMetric(n float64, unit string)
	Logf(format string, args ...any)
}

// Report adds r to a benchmark's results: its overhead and interval in
// percent (overhead-%, ci-lo-%, ci-hi-%) and the base's time per call
// (base-ns/call), and logs r.
func (r Result) Report(b Reporter) {
	pct, lo, hi := r.Overhead()
	b.ReportMetric(pct, "overhead-%")
	b.ReportMetric(lo, "ci-lo-%")
	b.ReportMetric(hi, "ci-hi-%")
	b.ReportMetric(float64(r.Base.Nanoseconds()), "base-ns/call")
	b.Logf("%v", r)
}
