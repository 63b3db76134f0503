package main

import (
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/sim"
)

func TestCheckPlotExt(t *testing.T) {
	for _, ok := range []string{"a.png", "b.SVG", "dir/c.svg"} {
		if err := checkPlotExt(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"a.jpg", "b", "c.png.txt"} {
		if err := checkPlotExt(bad); err == nil || !strings.HasPrefix(err.Error(), "simulate: ") {
			t.Errorf("%s: error %v", bad, err)
		}
	}
}

func TestPeakOver(t *testing.T) {
	res := []strategyResult{{"a", sim.Result{Capacity: 10, Load: []int{5, 150}}}, {"b", sim.Result{Capacity: 10, Load: []int{300}}}}
	if !peakOver(res, 20) {
		t.Error("300 > 20*10 not seen")
	}
	if peakOver(res, 40) {
		t.Error("300 > 40*10 reported")
	}
}

// A contention plot (no capacity line) and a plot with empty series are
// written without error.
func TestWritePlotEdges(t *testing.T) {
	dir := t.TempDir()
	res := []strategyResult{{"full", sim.Result{Slot: time.Second, Load: []int{3, 0, 2}}}, {"none", sim.Result{Slot: time.Second}}}
	if err := writePlot(filepath.Join(dir, "c.png"), "t", res); err != nil {
		t.Fatal(err)
	}
	if err := writePlot(filepath.Join(dir, "c.gif"), "t", res); err == nil {
		t.Error("gif accepted")
	}
}

// The plot's memory does not grow with the length of the load series (up to
// 2^20 slots per strategy): --max-memory bounds the simulation, and drawing
// millions of points would take more than it, for a picture 9 inches wide.
func TestWritePlotLongSeriesBounded(t *testing.T) {
	res := make([]strategyResult, 2)
	for i := range res {
		load := make([]int, 1<<17)
		for k := range load {
			load[k] = (k/64 + i) % 1000
		}
		load[12345] = 1e6 // a lone peak is kept
		res[i] = strategyResult{Name: fmt.Sprint("s", i), Result: sim.Result{Load: load, Capacity: 100, Slot: time.Millisecond}}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := writePlot(filepath.Join(t.TempDir(), "long.png"), "long", res); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Errorf("plotting 2 series of %d slots allocated %d MiB: want it bounded (at most 32 MiB)", 1<<17, got>>20)
	}
}

// A long series is drawn as its envelope: at most 2 points per bucket, the
// lowest and the highest, so peaks survive.
func TestPlotPointsEnvelope(t *testing.T) {
	load := make([]int, 1<<20)
	load[777777] = 5000
	load[3] = 7
	pts := plotPoints(load, time.Millisecond, true)
	if len(pts) > 2*plotBuckets {
		t.Fatalf("%d points for %d slots, want at most %d", len(pts), len(load), 2*plotBuckets)
	}
	var peak, low float64 = 0, 1e9
	for i, p := range pts {
		peak, low = max(peak, p.Y), min(low, p.Y)
		if i > 0 && p.X < pts[i-1].X {
			t.Fatalf("points out of time order at %d", i)
		}
	}
	if peak != 5000 || low != 1 {
		t.Errorf("envelope %v..%v, want 1..5000 (log scale: empty slots at 1)", low, peak)
	}
	if got := plotPoints([]int{1, 0, 2}, time.Second, false); len(got) != 3 || got[1].Y != 0 || got[2].X != 2 {
		t.Errorf("short series changed: %v", got)
	}
}

// The y axis ends above the highest point, at a labelled value: with full
// jitter's peak of 11,006 after a 10 s outage the axis stopped at the
// data's maximum, whose highest label was 10,000, and the curve ran along
// the top edge, clipped. Log and linear scales alike.
func TestPlotAxisAbovePeak(t *testing.T) {
	for _, c := range []struct {
		name string
		load []int
		logY bool
	}{
		{"log", []int{0, 11006, 300, 10000}, true},
		{"log, peak at a power of ten", []int{0, 10000, 5}, true},
		{"linear", []int{0, 1102, 130}, false},
		{"linear, below capacity", []int{0, 57, 30}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := []strategyResult{{"full", sim.Result{Capacity: 100, Slot: 100 * time.Millisecond, Load: c.load}}}
			if got := peakOver(res, 20); got != c.logY {
				t.Fatalf("log scale %v, want %v", got, c.logY)
			}
			p, err := newPlot("t", res)
			if err != nil {
				t.Fatal(err)
			}
			peak := float64(slices.Max(c.load))
			if c := float64(res[0].Result.Capacity); c > peak {
				peak = c // the capacity line is drawn too
			}
			if !(p.Y.Max > peak) {
				t.Errorf("y axis ends at %v, not above the peak %v", p.Y.Max, peak)
			}
			top := math.Inf(-1)
			for _, tk := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
				if tk.Label != "" && tk.Value <= p.Y.Max {
					top = max(top, tk.Value)
				}
			}
			if top < peak {
				t.Errorf("highest y label %v, below the peak %v (axis to %v)", top, peak, p.Y.Max)
			}
		})
	}
}
