package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"
)

// openRows runs `retry simulate args... --format json` and decodes its rows.
func openRows(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	out, _, err := simulate(t, append(args, "--format", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v in:\n%s", err, out)
	}
	for _, r := range rows {
		for _, k := range []string{"strategy", "offered_per_second", "goodput_per_second", "amplification", "recovered", "recovery_seconds"} {
			if _, ok := r[k]; !ok {
				t.Errorf("key %q missing from %v", k, r)
			}
		}
	}
	return rows
}

func skipFullScale(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("full-scale open-model runs are tested without -race (scripts/test-all.sh)")
	}
}

// Bronson's toy as published: ~560/s of load against 300 of capacity and
// goodput near zero; and what the remedies do to it.
func TestSimulateOpenBronsonJSON(t *testing.T) {
	rows := openRows(t, "--scenario", "bronson")
	r := rows[0]
	if off := r["offered_per_second"].(float64); math.Abs(off-560) > 56 {
		t.Errorf("offered %v/s, want 560 ± 10 %%", off)
	}
	if g := r["goodput_per_second"].(float64); g >= 14 || r["recovered"] != false || r["recovery_seconds"] != nil {
		t.Errorf("row %v: want goodput under 14/s, not recovered, recovery_seconds null", r)
	}
	rows = openRows(t, "--scenario", "bronson", "--compare", "plain,budget,no-retry,drop-expired", "--budget-ratio", "0.1")
	for i, want := range []bool{false, false, true, false} {
		if rows[i]["recovered"] != want {
			t.Errorf("%v: recovered %v, want %v", rows[i]["strategy"], rows[i]["recovered"], want)
		}
	}
	// A jitter names the plain policy with it: full jitter on 1 s waits
	// spreads Bronson's one resend, which still doubles the load.
	if j := openRows(t, "--scenario", "bronson", "--compare", "full", "--initial", "1s")[0]; j["strategy"] != "full" ||
		j["recovered"] != false || math.Abs(j["offered_per_second"].(float64)-560) > 56 {
		t.Errorf("full jitter: %v", j)
	}
	if s, ok := rows[2]["recovery_seconds"].(float64); !ok || s < 60 {
		t.Errorf("no-retry recovery_seconds %v, want over a minute (the backlog drains at 20/s)", rows[2]["recovery_seconds"])
	}
}

// The four published Huang outcomes through the flags that override the
// scenario.
func TestSimulateOpenHuangOutcomes(t *testing.T) {
	skipFullScale(t)
	for _, c := range []struct {
		args      []string
		recovered bool
	}{
		{[]string{"--trigger-capacity", "0.225"}, true},
		{nil, false},
		{[]string{"--trigger-for", "9s"}, true},
		{[]string{"--rate", "10000"}, true},
	} {
		for _, arr := range [][]string{{"--arrivals", "even"}, {"--arrivals", "poisson", "--seed", "1"},
			{"--arrivals", "poisson", "--seed", "2"}, {"--arrivals", "poisson", "--seed", "3"}} {
			args := append(append([]string{"--scenario", "huang"}, c.args...), arr...)
			r := openRows(t, args...)[0]
			if r["recovered"] != c.recovered {
				t.Errorf("%v: recovered %v, published %v", args, r["recovered"], c.recovered)
			}
		}
	}
}

// The protected Huang runs recover, each with its recovery time; the
// plain one stays at five attempts per call.
func TestSimulateOpenHuangProtected(t *testing.T) {
	skipFullScale(t)
	rows := openRows(t, "--scenario", "huang", "--compare", "plain,budget,backoff,drop-expired,aws")
	if rows[0]["recovered"] != false || rows[0]["amplification"].(float64) < 4.9 {
		t.Errorf("plain %v", rows[0])
	}
	for _, r := range rows[1:] {
		if _, ok := r["recovery_seconds"].(float64); r["recovered"] != true || !ok {
			t.Errorf("%v: %v", r["strategy"], r)
		}
	}
	r := openRows(t, "--scenario", "huang", "--throttle", "2", "--throttle-window", "10s")[0]
	if r["recovered"] != true || r["throttle"] != "local" {
		t.Errorf("throttle K=2 with a 10 s window: %v", r)
	}
	// The commands of issue 34, with the Throttle's defaults: both runs
	// get out, the Budget alone leaves Bronson's stuck, and both together
	// get both out.
	for _, sc := range []string{"huang", "bronson"} {
		if r := openRows(t, "--scenario", sc, "--throttle", "2")[0]; r["recovered"] != true {
			t.Errorf("%s --throttle 2: %v", sc, r)
		}
		if r := openRows(t, "--scenario", sc, "--budget", "local", "--throttle", "2")[0]; r["recovered"] != true {
			t.Errorf("%s --budget local --throttle 2: %v", sc, r)
		}
	}
}

// A fleet of 100 processes: 100 local floors keep Bronson's toy stuck
// where one shared budget gets it out.
func TestSimulateOpenFleet(t *testing.T) {
	var got []any
	for _, scope := range []string{"local", "shared"} {
		r := openRows(t, "--scenario", "bronson", "--processes", "100", "--budget", scope, "--budget-ratio", "0.01")[0]
		got = append(got, r["recovered"])
		if r["budget"] != scope || r["processes"] != 100.0 {
			t.Errorf("%s: %v", scope, r)
		}
	}
	if got[0] != false || got[1] != true {
		t.Errorf("recovered local %v, shared %v; want false, true", got[0], got[1])
	}
}

// Bad input is refused with the usage status and one line naming it.
func TestSimulateOpenBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--scenario", "huang", "--trigger-capacity", "1.5"}, "--trigger-capacity 1.5 is not a fraction in [0, 1]"},
		{[]string{"--model", "open", "--rate", "-1", "--service-rate", "10", "--duration", "1m"}, "--rate -1 must be a positive number"},
		{[]string{"--model", "open", "--rate", "5", "--duration", "1m"}, "--service-rate 0 must be a positive number"},
		{[]string{"--scenario", "nope"}, `unknown --scenario "nope" (want bronson or huang)`},
		{[]string{"--scenario", "huang", "--model", "capacity"}, "--scenario runs the open model"},
		{[]string{"--rate", "5"}, "--rate applies only to the open model"},
		{[]string{"--scenario", "huang", "--clients", "5"}, "--clients does not apply to the open model"},
		{[]string{"--scenario", "huang", "--csv", "a.svg", "--out", "./a.svg"}, "name the same file"},
		{[]string{"--scenario", "huang", "--compare", "plain,hedge"}, `unknown strategy "hedge"`},
		{[]string{"--scenario", "huang", "--throttle", "0.5"}, "--throttle 0.5: want 0 (none) or a K of at least 1"},
		{[]string{"--scenario", "huang", "--arrivals", "burst"}, `unknown --arrivals "burst"`},
		{[]string{"--scenario", "huang", "--sweep", "rate=1:2,trigger-for=1s:2s:1s"}, "want NAME=LO:HI:STEP"},
		{[]string{"--scenario", "huang", "--sweep", "rate=1:2:1"}, "want two axes"},
		{[]string{"--scenario", "huang", "--sweep", "trigger-capacity=0:2:0.5,trigger-for=1s:2s:1s"}, "--trigger-capacity 1.5 is not a fraction"},
		{[]string{"--scenario", "huang", "--queue-limit", "-3"}, "--queue-limit -3 must not be negative"},
		{[]string{"--scenario", "huang", "--timeout", "-1s"}, "--timeout -1s is negative"},
		{[]string{"--scenario", "huang", "--attempts", "-1", "--queue-limit", "5"}, "never ends"},
		{[]string{"--scenario", "huang", "--format", "xml"}, `unknown --format "xml"`},
		{[]string{"--scenario", "huang", "--out", "x.gif"}, "want a .png or .svg file"},
	} {
		_, _, err := simulate(t, c.args...)
		if err == nil {
			t.Errorf("%v: accepted", c.args)
			continue
		}
		var ec interface{ ExitCode() int }
		if !errors.As(err, &ec) || ec.ExitCode() != exitUsage || !strings.Contains(err.Error(), c.want) ||
			strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %q, want status %d and one line with %q", c.args, err, exitUsage, c.want)
		}
	}
}

// usageRefused checks that err is a refusal with the usage status, on one
// line containing want.
func usageRefused(t *testing.T, args []string, err error, want string) {
	t.Helper()
	var ec interface{ ExitCode() int }
	if err == nil || !errors.As(err, &ec) || ec.ExitCode() != exitUsage || !strings.Contains(err.Error(), want) ||
		strings.Contains(err.Error(), "\n") {
		t.Errorf("%v: %v, want status %d and one line with %q", args, err, exitUsage, want)
	}
}

// The runs that never ended are refused at once by their work
// estimate, with the usage status and one line; a sweep's cells are
// bounded together.
func TestSimulateOpenWorkRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "open", "--rate", "162", "--service-rate", "27", "--timeout", "50ns", "--initial", "0", "--attempts", "-1",
			"--duration", "1s", "--slot", "100ms"}, "over --max-work (1e+09)"},
		{[]string{"--model", "open", "--rate", "100", "--service-rate", "50", "--timeout", "1us", "--initial", "0", "--attempts", "-1",
			"--duration", "60s"}, "over --max-work"},
		{[]string{"--model", "open", "--rate", "10", "--service-rate", "1", "--duration", "1s", "--slot", "100ms", "--queue-limit", "1",
			"--initial", "1ns", "--max-delay", "1ns", "--jitter", "none", "--attempts", "-1"}, "over --max-work"},
		{[]string{"--model", "open", "--rate", "1e7", "--service-rate", "1e7", "--duration", "100000s"}, "over --max-work"},
		{[]string{"--scenario", "huang", "--compare", "plain,budget,throttle,aws,no-retry,retries2,backoff,drop-expired",
			"--sweep", "trigger-capacity=0:1:0.0625,trigger-for=1s:240s:1s"}, "over 1e+10 (10 × --max-work)"},
		{[]string{"--scenario", "huang", "--max-work", "1e6"}, "over --max-work (1e+06)"},
		{[]string{"--scenario", "huang", "--max-work", "0"}, "--max-work \"0\": want a number of attempts of at least 1"},
	} {
		start := time.Now()
		_, _, err := simulate(t, c.args...)
		usageRefused(t, c.args, err, c.want)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%v: refused after %v, want at once", c.args, d)
		}
	}
	// With --max-work none the first one starts, and ends with its
	// context.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cmd := newSimulateCmd()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--model", "open", "--rate", "162", "--service-rate", "27", "--timeout", "50ns", "--initial", "0",
		"--attempts", "-1", "--duration", "1s", "--slot", "100ms", "--max-work", "none"})
	if err := cmd.ExecuteContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("--max-work none: %v, want the context's deadline", err)
	}
}

// Verdicts: "cannot tell" (JSON null) where too little run follows the
// trigger or the trigger lies beyond the run; a growing queue is not
// recovered with or without a timeout; rates the model cannot represent
// are refused.
func TestSimulateOpenVerdicts(t *testing.T) {
	cases := [][]string{
		{"--model", "open", "--rate", "100", "--service-rate", "1000", "--duration", "29s"},
		{"--scenario", "bronson", "--trigger-at", "1000h"},
	}
	if !raceEnabled {
		cases = append(cases, []string{"--scenario", "huang", "--trigger-at", "1000h"})
	}
	for _, args := range cases {
		r := openRows(t, args...)[0]
		if v, ok := r["recovered"]; !ok || v != nil || r["recovery_seconds"] != nil {
			t.Errorf("%v: recovered %v, want null (cannot tell)", args, v)
		}
		out, _, err := simulate(t, args...)
		if err != nil || !strings.Contains(out, "cannot tell") {
			t.Errorf("%v: table %q, %v", args, out, err)
		}
	}
	for _, timeout := range []string{"0s", "1h"} {
		r := openRows(t, "--model", "open", "--rate", "100", "--service-rate", "96", "--duration", "600s", "--timeout", timeout)[0]
		if r["recovered"] != false {
			t.Errorf("a queue growing 4 a second, --timeout %s: recovered %v", timeout, r["recovered"])
		}
	}
	for _, args := range [][]string{
		{"--model", "open", "--rate", "2e9", "--service-rate", "3e9", "--duration", "1s"},
		{"--model", "open", "--rate", "1", "--service-rate", "3e9", "--duration", "1s"},
	} {
		_, _, err := simulate(t, args...)
		usageRefused(t, args, err, "per nanosecond")
	}
}

// --max-memory bounds the open model: a backlog that must pile up past it
// is refused up front, one that outgrows it ends the run (usage status).
func TestSimulateOpenMaxMemory(t *testing.T) {
	args := []string{"--model", "open", "--rate", "1e6", "--service-rate", "1", "--duration", "30s", "--max-memory", "64MiB"}
	_, _, err := simulate(t, args...)
	usageRefused(t, args, err, "over --max-memory 64.0 MiB")
	args = append(args, "--timeout", "10s")
	_, _, err = simulate(t, args...)
	usageRefused(t, args, err, "over --max-memory 64.0 MiB")
}

// A sweep runs its cells in parallel only as memory allows: a cell that
// outgrows its share runs again alone, and the grid is the same as with
// no limit.
func TestSimulateSweepMemoryShare(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs GOMAXPROCS 2 or more to share memory")
	}
	args := []string{"--model", "open", "--rate", "2e4", "--service-rate", "1e4", "--timeout", "5s", "--duration", "40s",
		"--attempts", "2", "--initial", "100ms", "--trigger-for", "1s", "--sweep", "trigger-capacity=0:0.5:0.5,rate=1e3:2e4:19e3", "--format", "json"}
	free, _, err := simulate(t, append(args, "--max-memory", "none")...)
	if err != nil {
		t.Fatal(err)
	}
	// The stuck cells hold 175,000 to 218,000 calls in flight at 96 bytes:
	// half of 20 MiB is too little, the whole is enough.
	shared, _, err := simulate(t, append(args, "--max-memory", "20MiB")...)
	if err != nil || shared != free {
		t.Errorf("with a memory share: %v\n%s\nwithout:\n%s", err, shared, free)
	}
}

// No silent no-ops: a flag that does nothing where it is given is refused
// with one line naming it and why.
func TestSimulateNoOpFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--scenario", "huang", "--compare", "full,none,decorrelated"}, "--compare full: a jitter does nothing to immediate resends"},
		{[]string{"--scenario", "bronson", "--budget-ratio", "0.01"}, "--budget-ratio does nothing without --budget"},
		{[]string{"--clients", "10", "--budget-window", "5s"}, "--budget-window does nothing without --budget"},
		{[]string{"--scenario", "bronson", "--compare", "plain,no-retry", "--throttle", "2"}, "--throttle does nothing here"},
		{[]string{"--scenario", "bronson", "--compare", "plain,no-retry", "--budget", "local"}, "--budget does nothing here"},
		{[]string{"--scenario", "bronson", "--throttle-window", "10s"}, "--throttle-window does nothing without a throttle"},
		{[]string{"--model", "open", "--rate", "10", "--service-rate", "20", "--duration", "1m", "--spike-for", "5s"}, "--spike-for does nothing without --spike-factor"},
		{[]string{"--model", "open", "--rate", "10", "--service-rate", "20", "--duration", "1m", "--spike-factor", "3"}, "--spike-factor does nothing without --spike-for"},
		{[]string{"--model", "open", "--rate", "10", "--service-rate", "20", "--duration", "1m", "--trigger-capacity", "0.5"}, "--trigger-capacity does nothing without --trigger-for"},
		{[]string{"--scenario", "bronson", "--compare", "drop-expired", "--drop-expired=false"}, "--drop-expired does nothing beside the drop-expired strategy"},
	} {
		_, _, err := simulate(t, c.args...)
		usageRefused(t, c.args, err, c.want)
	}
	// What they were once refused for works: a sweep over the rate needs
	// no --rate, and a jitter applies to waits.
	if _, _, err := simulate(t, "--model", "open", "--service-rate", "100", "--duration", "40s", "--timeout", "1s",
		"--trigger-for", "2s", "--sweep", "rate=50:90:40,trigger-capacity=0:0.5:0.5"); err != nil {
		t.Errorf("--sweep rate=... without --rate: %v", err)
	}
	if rows := openRows(t, "--scenario", "bronson", "--initial", "100ms", "--compare", "full,none"); len(rows) != 2 {
		t.Errorf("jitters with waits: %v", rows)
	}
}

// --help gives each model's own default slot.
func TestSimulateHelpSlot(t *testing.T) {
	out, _, err := simulate(t, "--help")
	if err != nil || !strings.Contains(out, "(default 100ms; the open model's: 1s)") || strings.Contains(out, "(default 100ms)") {
		t.Errorf("--help: %v\n%s", err, out)
	}
}

// Every strategy of one --compare sees the same arrivals under Poisson
// arrivals (common random numbers), whatever its own random draws.
func TestSimulateOpenCommonArrivals(t *testing.T) {
	rows := openRows(t, "--scenario", "bronson", "--arrivals", "poisson", "--seed", "3", "--initial", "100ms",
		"--compare", "plain,full,no-retry,budget,throttle")
	for _, r := range rows[1:] {
		if r["arrivals"] != rows[0]["arrivals"] {
			t.Errorf("%v: %v arrivals, plain %v", r["strategy"], r["arrivals"], rows[0]["arrivals"])
		}
	}
	if rows[0]["sent"] == rows[1]["sent"] {
		t.Errorf("plain and full jitter sent the same %v attempts", rows[0]["sent"])
	}
}
