package main

import (
	"path/filepath"
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
