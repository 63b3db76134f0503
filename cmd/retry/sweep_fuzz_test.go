package main

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// FuzzParseSweep: any --sweep value either gives two distinct axes of
// increasing, finite, non-negative values within maxSweepCells cells, or a
// one-line usage error; never a panic.
func FuzzParseSweep(f *testing.F) {
	for _, s := range []string{"trigger-capacity=0.3:0.7:0.05,trigger-for=2s:20s:2s", "rate=1:2:1,trigger-for=1s:1s:1s",
		"rate=1:2", "rate=1:2:0,trigger-for=1s:2s:1s", "x=1:2:1,y=1:2:1", "rate=1:1e9:1,trigger-for=1s:2s:1s",
		"rate=NaN:1:1,trigger-for=1s:2s:1s", "rate=1:2:1,rate=1:2:1", ",", "=", "rate=1e17:100000000000000100:1,trigger-for=1s:2s:1s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sw, err := parseSweep(s)
		if err != nil {
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != exitUsage || strings.ContainsAny(ee.msg, "\n\r") {
				t.Fatalf("parseSweep(%q): %v is not a one-line usage error", s, err)
			}
			return
		}
		if sw.axes[0].name == sw.axes[1].name {
			t.Fatalf("parseSweep(%q): one axis twice", s)
		}
		if n := len(sw.axes[0].values) * len(sw.axes[1].values); n < 1 || n > maxSweepCells {
			t.Fatalf("parseSweep(%q): %d cells", s, n)
		}
		for _, a := range sw.axes {
			for i, v := range a.values {
				if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || i > 0 && !(v > a.values[i-1]) {
					t.Fatalf("parseSweep(%q): axis %s values %v", s, a.name, a.values)
				}
			}
		}
	})
}
