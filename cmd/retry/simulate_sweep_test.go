package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrykit/retry/sim"
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

func TestSimulateOpenSweep(t *testing.T) {
	dir := t.TempDir()
	png := filepath.Join(dir, "phase.png")
	out, _, err := simulate(t, "--scenario", "bronson", "--duration", "200s", "--compare", "plain,no-retry",
		"--sweep", "trigger-capacity=0.2:0.8:0.6,trigger-for=2s:10s:8s", "--format", "json", "--out", png)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 8 {
		t.Fatalf("%d rows, want 2 strategies × 2 × 2 cells", len(rows))
	}
	// plain: stuck but for a short, shallow trigger.
	for _, r := range rows[:4] {
		shallow := r["x_value"] == 0.8 && r["y_value"] == 2.0
		if r["recovered"] != shallow {
			t.Errorf("plain cell %v", r)
		}
	}
	if b, err := os.ReadFile(png); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("phase plot: %v, %d bytes", err, len(b))
	}
	table, _, err := simulate(t, "--scenario", "bronson", "--duration", "200s",
		"--sweep", "trigger-capacity=0.2:0.8:0.6,trigger-for=2s:10s:8s")
	if err != nil || !strings.Contains(table, "stuck") || !strings.Contains(table, "0.8") {
		t.Errorf("table %v:\n%s", err, table)
	}
}

// BenchmarkSimulateOpenSweep times a phase-diagram sweep of the Huang
// scenario: 3 × 3 cells of trigger capacity and length, plain retries.
func BenchmarkSimulateOpenSweep(b *testing.B) {
	sw, err := parseSweep("trigger-capacity=0.3:0.5:0.1,trigger-for=5s:15s:5s")
	if err != nil {
		b.Fatal(err)
	}
	s := sim.Huang()
	for b.Loop() {
		if _, err := sw.run(context.Background(), []string{"plain"}, []sim.OpenScenario{s}, nil); err != nil {
			b.Fatal(err)
		}
	}
}
