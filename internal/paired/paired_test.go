package paired

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// fakeClock advances only when the functions measured say so.
type fakeClock struct{ t time.Duration }

func (c *fakeClock) now() time.Duration { return c.t }

// TestRatioCancelsDrift: the machine slows down steadily, call after
// call, and jumps between rounds, but a variant that costs 2 % more per
// call is found at exactly 1.02.
func TestRatioCancelsDrift(t *testing.T) {
	var c fakeClock
	calls := 0
	speed := func() time.Duration { // slower and slower, and jittered per round of 8 blocks of 5
		calls++
		return time.Duration(100 + calls + 1000*(((calls-1)/40)%3))
	}
	var order []byte
	base := func() { c.t += 100 * speed(); order = append(order, 'b') }
	variant := func() { c.t += 102 * speed(); order = append(order, 'v') }
	r := measure(100, 5, base, variant, c.now)
	if !strings.HasPrefix(string(order), "bbbbbvvvvvvvvvvbbbbbvvvvvbbbbbbbbbbvvvvvbbbbb") {
		t.Fatalf("order %.45s; want ABBA BAAB blocks", order)
	}
	if math.Abs(r.Ratio-1.02) > 1e-9 || math.Abs(r.Lo-1.02) > 1e-9 || math.Abs(r.Hi-1.02) > 1e-9 {
		t.Fatalf("ratio %v [%v, %v]; want exactly 1.02", r.Ratio, r.Lo, r.Hi)
	}
	if pct, _, _ := r.Overhead(); math.Abs(pct-2) > 1e-6 {
		t.Fatalf("overhead %v %%; want 2", pct)
	}
	if !strings.Contains(r.String(), "+2.00 %") {
		t.Fatalf("String() = %q", r.String())
	}
}

// TestInterval: ratios that vary from round to round give an interval
// around the median that holds it, within the ratios seen.
func TestInterval(t *testing.T) {
	var c fakeClock
	round := 0
	base := func() { c.t += 100 }
	variant := func() { c.t += time.Duration(95 + round%11); round++ } // 95..105 per call
	r := measure(200, 1, base, variant, c.now)
	if !(r.Lo <= r.Ratio && r.Ratio <= r.Hi) || r.Lo < 0.95 || r.Hi > 1.05 || r.Hi-r.Lo <= 0 {
		t.Fatalf("ratio %v [%v, %v]; want a non-empty interval around it within [0.95, 1.05]", r.Ratio, r.Lo, r.Hi)
	}
}

// TestMedianInterval checks the ranks against binomial tables: for 100
// samples the 95 % interval of the median is between the 40th and 61st
// values (1-based), for 10 between the 2nd and 9th.
func TestMedianInterval(t *testing.T) {
	for _, c := range []struct{ n, j, k int }{{10, 1, 8}, {100, 39, 60}, {11, 1, 9}} {
		if j, k := medianInterval(c.n); j != c.j || k != c.k {
			t.Errorf("medianInterval(%d) = %d, %d; want %d, %d", c.n, j, k, c.j, c.k)
		}
	}
}

func TestMeasureRefusesTooFewRounds(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("5 rounds: want a panic naming the minimum")
		}
	}()
	Measure(5, 1, func() {}, func() {})
}

type metrics struct {
	m    map[string]float64
	logs []string
}

func (m *metrics) ReportMetric(n float64, unit string) { m.m[unit] = n }
func (m *metrics) Logf(format string, args ...any) {
	m.logs = append(m.logs, fmt.Sprintf(format, args...))
}

func TestReport(t *testing.T) {
	r := Result{Rounds: 10, Block: 1, Base: 100, Variant: 103, Ratio: 1.03, Lo: 1.01, Hi: 1.05}
	m := &metrics{m: map[string]float64{}}
	r.Report(m)
	want := map[string]float64{"overhead-%": 3, "ci-lo-%": 1, "ci-hi-%": 5, "base-ns/call": 100}
	for k, v := range want {
		if math.Abs(m.m[k]-v) > 1e-9 {
			t.Errorf("%s = %v; want %v", k, m.m[k], v)
		}
	}
	if len(m.logs) != 1 || !strings.Contains(m.logs[0], "+3.00 %") {
		t.Errorf("logs %q", m.logs)
	}
}
