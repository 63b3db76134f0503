package main

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
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
		{[]string{"--trigger-capacity", "0.45"}, true},
		{nil, false},
		{[]string{"--trigger-for", "9s"}, true},
		{[]string{"--rate", "10000"}, true},
	} {
		for _, arr := range [][]string{{"--arrivals", "even"}, {"--arrivals", "poisson", "--seed", "2"}} {
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
	rows := openRows(t, "--scenario", "huang", "--compare", "plain,budget,backoff,drop-expired,aws", "--throttle-window", "10s")
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
