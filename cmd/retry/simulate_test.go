package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
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

func TestSimulateTable(t *testing.T) {
	out, _, err := simulate(t, "--clients", "2000", "--capacity", "50", "--outage", "5s", "--attempts", "-1",
		"--compare", "none,full,equal,decorrelated,additive")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("want a header and 5 rows, got:\n%s", out)
	}
	for i, name := range []string{"strategy", "none", "full", "equal", "decorrelated", "additive"} {
		if f := strings.Fields(lines[i]); f[0] != name {
			t.Errorf("line %d starts %q, want %q", i, f[0], name)
		}
		if len(lines[i]) != len(lines[0]) {
			t.Errorf("line %d is %d wide, header %d: not aligned", i, len(lines[i]), len(lines[0]))
		}
	}
	t.Log("\n" + out)
}

func TestSimulateJSON(t *testing.T) {
	out, _, err := simulate(t, "--model", "contention", "--clients", "100", "--trials", "20", "--initial", "10ms",
		"--max-delay", "2s", "--attempts", "-1", "--compare", "full,none", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v in:\n%s", err, out)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	for _, k := range []string{"strategy", "clients", "trials", "requests", "succeeded", "gave_up",
		"completion_p50_ms", "completion_p99_ms", "completion_max_ms", "peak_load"} {
		if _, ok := rows[0][k]; !ok {
			t.Errorf("key %q missing from %v", k, rows[0])
		}
	}
	full, none := rows[0], rows[1]
	if full["strategy"] != "full" || full["clients"] != 100.0 || full["trials"] != 20.0 || full["succeeded"] != 100.0 {
		t.Errorf("full row %v", full)
	}
	if !(full["requests"].(float64) < none["requests"].(float64)/2) ||
		!(5*full["completion_max_ms"].(float64) < none["completion_max_ms"].(float64)) {
		t.Errorf("full %v vs none %v: want under half the work and over 5x sooner", full, none)
	}
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
	for name, args := range map[string][]string{
		"--clients":   {"--clients", "0"},
		"--capacity":  {"--capacity", "-3"},
		"strategy":    {"--compare", "full,bogus"},
		"model":       {"--model", "queue"},
		"--format":    {"--format", "xml"},
		"--out":       {"--out", "x.jpg"},
		"--max-delay": {"--initial", "5s", "--max-delay", "1s"},
		"twice":       {"--compare", "full,full"},
	} {
		_, _, err := simulate(t, args...)
		if err == nil || exitStatus(err) != exitUsage {
			t.Errorf("%s: error %v (%T), want a usage error (exit %d)", name, err, err, exitUsage)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, name) {
			t.Errorf("%s: message %q: want one line naming it", name, msg)
		}
	}
}

func TestParseStrategy(t *testing.T) {
	for in, want := range map[string]string{
		"none": "none", "full": "full", "equal": "equal", "decorrelated": "decorrelated",
		"additive": "additive:1s", "additive:5ms": "additive:5ms", "proportional:0.2": "proportional:0.2",
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

// The progress bar is drawn only on a terminal, and only after a second.
func TestProgressBar(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skip("no pty:", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	p := newProgress(tty, 100)
	if !p.on {
		t.Fatal("a pty is not seen as a terminal")
	}
	p.update(10) // under a second: nothing
	if p.shown {
		t.Fatal("bar drawn before a second had passed")
	}
	p.start = p.start.Add(-2 * time.Second)
	p.update(50)
	p.clear()
	buf := make([]byte, 256)
	n, _ := ptmx.Read(buf)
	if got := string(buf[:n]); !strings.Contains(got, "simulating [###############...............]  50%") {
		t.Errorf("bar %q", got)
	}
	var b bytes.Buffer
	if q := newProgress(&b, 100); q.on {
		t.Error("a buffer is seen as a terminal")
	}
}
