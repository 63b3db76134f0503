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

// simulate runs `retry simulate args...` in-process.
func simulate(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newSimulateCmd()
	var o, e bytes.Buffer
	cmd.SetOut(&o)
	cmd.SetErr(&e)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return o.String(), e.String(), err
}

func TestSimulateFiles(t *testing.T) {
	dir := t.TempDir()
	png, svg, csv := filepath.Join(dir, "h.png"), filepath.Join(dir, "h.svg"), filepath.Join(dir, "h.csv")
	for _, out := range []string{png, svg} {
		if _, _, err := simulate(t, "--clients", "1000", "--capacity", "20", "--outage", "3s", "--compare", "none,full",
			"--out", out, "--csv", csv); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(png)
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("png: %v, starts %q", err, b[:min(len(b), 8)])
	}
	b, err = os.ReadFile(svg)
	if err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("svg: %v", err)
	}
	b, err = os.ReadFile(csv)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if lines[0] != "time_s,capacity,none,full" || !strings.HasPrefix(lines[1], "0,20,1000,") {
		t.Errorf("csv starts %q", lines[:2])
	}
}

func TestSimulateBadInput(t *testing.T) {
	for _, c := range []struct {
		name string // the message must name it
		args []string
	}{
		{"--clients", []string{"--clients", "0"}},
		{"--capacity", []string{"--capacity", "-3"}},
		{"strategy", []string{"--compare", "full,bogus"}},
		{"model", []string{"--model", "queue"}},
		{"--format", []string{"--format", "xml"}},
		{"--out", []string{"--out", "x.jpg"}},
		{"--max-delay", []string{"--initial", "5s", "--max-delay", "1s"}},
		{"twice", []string{"--compare", "full,full"}},
		// Flags, never the Go fields behind them.
		{"--outage", []string{"--outage", "-1s"}},
		{"--start-window", []string{"--start-window", "-1s"}},
		{"--retry-after", []string{"--retry-after", "1001h"}},
		{"--latency-sd", []string{"--latency-sd", "-2ms"}},
		{"--max-delay", []string{"--initial", "1h", "--max-delay", "1001h"}},
		{"--attempts -1", []string{"--initial", "0", "--attempts", "-1", "--outage", "1s"}},
		{"--max-elapsed", []string{"--initial", "0", "--attempts", "-1", "--outage", "1s", "--max-elapsed", "5s"}},
		{"--max-delay 1ns", []string{"--initial", "1ns", "--max-delay", "1ns", "--attempts", "-1", "--outage", "1h"}},
		{"--processes", []string{"--clients", "10", "--processes", "11"}},
		{"--processes", []string{"--processes", "0"}},
		{"--budget", []string{"--budget", "global"}},
		{"--budget-ratio", []string{"--budget", "local", "--budget-ratio", "0"}},
		{"--budget-window", []string{"--budget", "shared", "--budget-window", "10us"}},
		{"--max-memory", []string{"--max-memory", "lots"}},
		{"--max-memory", []string{"--clients", "10000000", "--max-memory", "64MiB"}},
		{"--max-memory", []string{"--clients", "2000000000"}},
		{"--clients", []string{"--clients", "2600", "--capacity", "1", "--slot", "1000h", "--initial", "1000h", "--max-delay", "1000h", "--attempts", "-1"}},
		// Zero would silently mean the simulator's default.
		{"--latency 0", []string{"--model", "contention", "--latency", "0"}},
		{"--latency-sd 0", []string{"--model", "contention", "--latency-sd", "0"}},
		// Every strategy of --compare is checked before the first runs (the
		// first would run for seconds; the second needs more memory).
		{"decorrelated", []string{"--clients", "1000000", "--slot", "1ms", "--multiplier", "1", "--initial", "1ms", "--max-delay", "1000h",
			"--outage", "1h", "--attempts", "300", "--compare", "none,decorrelated", "--max-memory", "200MiB"}},
		// --compare names the strategies: a --jitter beside it would be ignored.
		{"--jitter and --compare", []string{"--jitter", "full", "--compare", "none,equal"}},
	} {
		start := time.Now()
		_, _, err := simulate(t, c.args...)
		var ue interface{ ExitCode() int }
		if !errors.As(err, &ue) || ue.ExitCode() != exitUsage {
			t.Errorf("%v: error %v (%T), want a usage error (exit %d)", c.args, err, err, exitUsage)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || !strings.Contains(msg, c.name) {
			t.Errorf("%v: message %q: want one line naming %s", c.args, msg, c.name)
		}
		for _, field := range []string{"Outage", "StartWindow", "RetryAfter", "LatencySD", "Policy.", "MaxDelay", "MaxAttempts",
			"MaxElapsed", "MaxMemory", "Processes", "Budget", "Clients", "MaxTime", "MaxDuration", "MaxRequests"} {
			if strings.Contains(msg, field) {
				t.Errorf("%v: message %q names the Go field %s", c.args, msg, field)
			}
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%v: refused after %v", c.args, d)
		}
	}
}

// simulate lists no flag that does nothing there.
func TestSimulateFlags(t *testing.T) {
	cmd := newSimulateCmd()
	for _, name := range []string{"attempt-timeout", "quiet", "verbose", "log-format"} {
		if cmd.Flags().Lookup(name) != nil {
			t.Errorf("simulate has --%s, which does nothing there", name)
		}
	}
	for _, name := range []string{"attempts", "initial", "jitter", "max-elapsed", "processes", "budget", "max-memory"} {
		if cmd.Flags().Lookup(name) == nil {
			t.Errorf("simulate has no --%s", name)
		}
	}
}

// P processes against a dead backend: one shared budget sends a fraction
// of what P local budgets send.
func TestSimulateFleet(t *testing.T) {
	args := []string{"--clients", "1000", "--start-window", "60s", "--outage", "1000h", "--attempts", "-1", "--max-elapsed", "60s",
		"--jitter", "full", "--initial", "100ms", "--max-delay", "10s", "--processes", "100", "--format", "json"}
	retries := map[string]float64{}
	for _, b := range []string{"local", "shared"} {
		out, _, err := simulate(t, append(args, "--budget", b)...)
		if err != nil {
			t.Fatal(err)
		}
		var rows []map[string]any
		if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
			t.Fatalf("%v in:\n%s", err, out)
		}
		if rows[0]["budget"] != b || rows[0]["processes"] != 100.0 {
			t.Errorf("row %v", rows[0])
		}
		retries[b] = rows[0]["retries"].(float64)
	}
	// The bound of one shared budget: 10 % of 1,000 first attempts plus
	// 1/s over the 120 s of the run and two windows of 10 s.
	if bound := 0.1*1000 + 1*(120+20); retries["shared"] > bound || retries["local"] < 10*retries["shared"] {
		t.Errorf("retries: local %v, shared %v (bound %v)", retries["local"], retries["shared"], bound)
	}
	out, _, err := simulate(t, append(args[:len(args)-2], "--budget", "shared")...)
	if err != nil || !strings.Contains(out, "budget refused") {
		t.Errorf("table without the budget columns (%v):\n%s", err, out)
	}
	t.Logf("retries from 100 processes: local budgets %v, one shared budget %v", retries["local"], retries["shared"])
}

func TestParseStrategy(t *testing.T) {
	for in, want := range map[string]string{
		"none": "none", "full": "full", "equal": "equal", "decorrelated": "decorrelated",
		"additive": "additive", "additive:5ms": "additive:5ms", "proportional:0.2": "proportional:0.2",
	} {
		j, err := parseStrategy(in)
		if err != nil || j.String() != want {
			t.Errorf("parseStrategy(%q) = %v, %v; want %s", in, j, err, want)
		}
	}
	for _, in := range []string{"", "full:1", "additive:-1s", "proportional:2", "proportional", "x"} {
		if _, err := parseStrategy(in); err == nil {
			t.Errorf("parseStrategy(%q) accepted", in)
		}
	}
}

// TestOutputThroughDanglingSymlink: an output named by a symbolic link
// whose target does not exist yet is written to the target, as a shell's
// > does, not refused.
func TestOutputThroughDanglingSymlink(t *testing.T) {
	dir := t.TempDir()
	link, target := filepath.Join(dir, "out.csv"), filepath.Join(dir, "target.csv")
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("no symlinks: %v", err)
	}
	o, err := openOutputFlag("--csv", link)
	if err != nil {
		t.Fatalf("openOutputFlag through a dangling link: %v", err)
	}
	o.f.WriteString("x")
	o.f.Close()
	if b, err := os.ReadFile(target); err != nil || string(b) != "x" {
		t.Fatalf("target %q, %v; want x", b, err)
	}
}

// --csv and --out naming one file in two ways (a relative and an absolute
// path, a link and its target) are refused before the run: the plot would
// overwrite the CSV. A file that existed is left as it was.
func TestSimulateCSVAndOutSameFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("b.svg", []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("b.svg", "link.svg"); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{{filepath.Join(dir, "a.svg"), "a.svg"}, {"link.svg", "b.svg"}} {
		_, _, err := simulate(t, "--clients", "100", "--csv", c[0], "--out", c[1])
		var ue interface{ ExitCode() int }
		if !errors.As(err, &ue) || ue.ExitCode() != exitUsage || !strings.Contains(err.Error(), "same file") {
			t.Errorf("--csv %s --out %s: %v; want the usage error naming the same file", c[0], c[1], err)
		}
	}
	if _, err := os.Stat("a.svg"); !os.IsNotExist(err) {
		t.Errorf("a.svg, created for the refused run, was left behind (%v)", err)
	}
	if b, _ := os.ReadFile("b.svg"); string(b) != "precious" {
		t.Errorf("b.svg holds %q after the refused run", b)
	}
}

// A load series cut at sim.MaxLoadSlots is said on stderr when it goes to
// a file, not left silent.
func TestSimulateSaysSeriesCut(t *testing.T) {
	dir := t.TempDir()
	_, stderr, err := simulate(t, "--clients", "10", "--outage", "30h", "--initial", "1s", "--max-delay", "10m",
		"--attempts", "-1", "--slot", "100ms", "--csv", filepath.Join(dir, "long.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "stops after 1048576 slots of 100ms") {
		t.Errorf("stderr %q: want the cut of the load series said", stderr)
	}
	_, stderr, err = simulate(t, "--clients", "10", "--outage", "10s", "--csv", filepath.Join(dir, "short.csv"))
	if err != nil || stderr != "" {
		t.Errorf("a series that is not cut: err %v, stderr %q", err, stderr)
	}
}
