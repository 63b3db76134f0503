package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

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

// The progress bar is drawn only on a terminal, and only after a second.
func TestProgressBar(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		if os.Getenv("RETRYKIT_REQUIRE_PTY") == "1" { // as openPTY of the package's external tests
			t.Fatalf("no pty: %v (RETRYKIT_REQUIRE_PTY=1 makes the terminal tests required)", err)
		}
		t.Skipf("no pty: %v", err)
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
