package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSimulateHedgeTable(t *testing.T) {
	out, _, err := simulate(t, "hedge", "--requests", "5000", "--tail", "0.01", "--quantiles", "0.9,0.95")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	want := []string{"hedge", "none", "fixed", "adaptive", "fixed", "adaptive", "fixed", "adaptive", "fixed", "adaptive"}
	if len(lines) != len(want) {
		t.Fatalf("want a header and 9 rows, got:\n%s", out)
	}
	for i, w := range want {
		if f := strings.Fields(lines[i]); f[0] != w {
			t.Errorf("line %d starts %q, want %q", i, f[0], w)
		}
	}
	if !strings.Contains(lines[9], "+budget") {
		t.Errorf("last row %q is not budgeted", lines[9])
	}
}

func TestSimulateHedgeJSON(t *testing.T) {
	out, _, err := simulate(t, "hedge", "--requests", "5000", "--correlated", "1", "--quantiles", "0.9", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Hedge string  `json:"hedge"`
		Extra float64 `json:"extra_requests"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 5 {
		t.Fatalf("%v, %d rows in:\n%s", err, len(rows), out)
	}
	// The fixed delay is tuned on the healthy latencies, so in the outage
	// every request hedges: the load doubles, and the budget holds it near
	// 10 %.
	if rows[1].Extra < 0.9 || rows[3].Extra > 0.11 || !strings.HasSuffix(rows[3].Hedge, "+budget") {
		t.Errorf("rows %+v", rows)
	}
}

func TestSimulateHedgeBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"--quantiles", "1"},
		{"--quantiles", "0.5,x"},
		{"--copies", "0"},
		{"--copies", "17"},
		{"--requests", "0"},
		{"--rate", "0"},
		{"--sigma", "0"},
		{"--stragglers", "2"},
		{"--correlated", "-1"},
		{"--budget", "local"},
		{"--budget-window", "1us"},
		{"--format", "xml"},
		{"--warm-up", "2000"},
		{"extra"},
	} {
		_, _, err := simulate(t, append([]string{"hedge"}, args...)...)
		var ec interface{ ExitCode() int }
		if !errors.As(err, &ec) || ec.ExitCode() != exitUsage || strings.Contains(err.Error(), "\n") ||
			!strings.HasPrefix(err.Error(), "simulate hedge: ") && args[0] != "extra" {
			t.Errorf("%v: error %v, want one usage line", args, err)
		}
	}
}

func TestSimulateHedgePlot(t *testing.T) {
	out := filepath.Join(t.TempDir(), "curve.png")
	if _, _, err := simulate(t, "hedge", "--requests", "2000", "--tail", "0.01", "--quantiles", "0.9,0.99", "--out", out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("%s: %v, %d bytes, not a PNG", out, err, len(b))
	}
	bad := filepath.Join(t.TempDir(), "curve.txt")
	_, _, err = simulate(t, "hedge", "--out", bad)
	var ec interface{ ExitCode() int }
	if !errors.As(err, &ec) || ec.ExitCode() != exitUsage {
		t.Errorf("--out %s: %v, want a usage error", bad, err)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Errorf("%s created for a refused run", bad)
	}
}

// The hedge model's clock cannot wrap, and its memory is bounded by
// --max-memory: each refused at once with one usage line naming why.
func TestSimulateHedgeBounds(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "1e-6", "--requests", "100000"}, "arrive over 1e+11 s, over the model's"},
		{[]string{"--rate", "1e-300"}, "over the model's"},
		{[]string{"--rate", "2e9"}, "--rate 2e+09 is over 1e+09 per second"},
		{[]string{"--requests", "10000000", "--max-memory", "1GiB"}, "over --max-memory 1.0 GiB"},
		{[]string{"--max-memory", "lots"}, `--max-memory "lots"`},
	} {
		start := time.Now()
		args := append([]string{"hedge"}, c.args...)
		_, _, err := simulate(t, args...)
		usageRefused(t, args, err, c.want)
		if time.Since(start) > 2*time.Second {
			t.Errorf("%v: refused after %v", args, time.Since(start))
		}
	}
}
