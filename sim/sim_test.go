package sim_test

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sim"
)

func study(j retry.Jitter, trials int) sim.Scenario {
	return sim.Scenario{Model: sim.Contention, Clients: 100, Trials: trials, Seed: 1,
		Policy: retry.Policy{Initial: 10 * time.Millisecond, MaxDelay: 2 * time.Second, Jitter: j, MaxAttempts: retry.Unlimited}}
}

func run(t *testing.T, s sim.Scenario) sim.Result {
	t.Helper()
	r, err := sim.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestStudy checks the contention model against the published figures
// (within 20%) and the direction the issue requires.
func TestStudy(t *testing.T) {
	want := []struct {
		j     retry.Jitter
		calls float64
		done  time.Duration
	}{
		{retry.FullJitter(), 796, 4900 * time.Millisecond},
		{retry.EqualJitter(), 813, 6600 * time.Millisecond},
		{retry.DecorrelatedJitter(), 999, 4500 * time.Millisecond},
		{retry.NoJitter(), 1860, 63900 * time.Millisecond},
	}
	got := map[string]sim.Result{}
	for _, w := range want {
		r := run(t, study(w.j, 100))
		got[w.j.String()] = r
		t.Logf("%-13s calls %7.1f (study %4.0f)  completion %v (study %v)", w.j, r.Requests, w.calls, r.CompletionMax.Round(time.Millisecond), w.done)
		if r.Succeeded != 100 || r.GaveUp != 0 {
			t.Errorf("%v: succeeded %v gave up %v, want 100 and 0", w.j, r.Succeeded, r.GaveUp)
		}
		if d := r.Requests/w.calls - 1; d > 0.2 || d < -0.2 {
			t.Errorf("%v: calls %.1f, study %v: off by %.0f%%", w.j, r.Requests, w.calls, 100*d)
		}
		if d := float64(r.CompletionMax)/float64(w.done) - 1; d > 0.2 || d < -0.2 {
			t.Errorf("%v: completion %v, study %v: off by %.0f%%", w.j, r.CompletionMax, w.done, 100*d)
		}
	}
	full, none := got["full"], got["none"]
	if !(full.Requests < none.Requests/2) {
		t.Errorf("full jitter %v calls, none %v: want less than half", full.Requests, none.Requests)
	}
	if !(5*full.CompletionMax < none.CompletionMax) {
		t.Errorf("full jitter completes at %v, none at %v: want over 5x sooner", full.CompletionMax, none.CompletionMax)
	}
}

// TestOutageWaves: after an outage, no jitter retries in synchronized
// waves far above capacity; full jitter spreads the load near capacity.
func TestOutageWaves(t *testing.T) {
	base := sim.Scenario{Clients: 10000, Capacity: 100, Slot: 100 * time.Millisecond, Outage: 10 * time.Second,
		Policy: retry.Policy{Initial: 100 * time.Millisecond, MaxDelay: 10 * time.Second, MaxAttempts: retry.Unlimited}}
	peakAfter := func(r sim.Result) int {
		p := 0
		for i, n := range r.Load {
			if time.Duration(i)*r.Slot >= 11*time.Second { // past the outage and its first wave
				p = max(p, n)
			}
		}
		return p
	}
	none, full := base, base
	none.Policy.Jitter = retry.NoJitter()
	full.Policy.Jitter = retry.FullJitter()
	rn, rf := run(t, none), run(t, full)
	pn, pf := peakAfter(rn), peakAfter(rf)
	t.Logf("peak after outage: none %d, full %d (capacity 100); requests none %.0f, full %.0f; done none %v, full %v",
		pn, pf, rn.Requests, rf.Requests, rn.CompletionMax, rf.CompletionMax)
	if pn < 10*base.Capacity {
		t.Errorf("no jitter: peak %d after the outage, want waves far above capacity %d", pn, base.Capacity)
	}
	if pf > 3*base.Capacity {
		t.Errorf("full jitter: peak %d after the outage, want near capacity %d", pf, base.Capacity)
	}
	if rn.Succeeded != 10000 || rf.Succeeded != 10000 {
		t.Errorf("succeeded none %v full %v, want all", rn.Succeeded, rf.Succeeded)
	}
}

func TestCapacityBasics(t *testing.T) {
	// 250 clients, 100 per slot, no retries needed beyond capacity: all
	// succeed, the first 100 at time 0.
	r := run(t, sim.Scenario{Clients: 250, Capacity: 100, Policy: retry.Policy{Jitter: retry.NoJitter(), MaxAttempts: retry.Unlimited}})
	if r.Succeeded != 250 || r.GaveUp != 0 {
		t.Fatalf("succeeded %v gave up %v", r.Succeeded, r.GaveUp)
	}
	if r.Load[0] != 250 || r.PeakLoad != 250 {
		t.Errorf("load[0] %d peak %v, want 250", r.Load[0], r.PeakLoad)
	}
	// 150 fail at 0, retry at 1 s: 100 succeed, 50 retry at 3 s.
	if r.Requests != 250+150+50 {
		t.Errorf("requests %v, want 450", r.Requests)
	}
	if r.CompletionMax != 3*time.Second || r.CompletionP50 != time.Second {
		t.Errorf("completion p50 %v max %v, want 1s and 3s", r.CompletionP50, r.CompletionMax)
	}
	// MaxAttempts 2 with an outage: everyone gives up after 2 calls.
	r = run(t, sim.Scenario{Clients: 10, Outage: time.Hour, Policy: retry.Policy{MaxAttempts: 2}})
	if r.GaveUp != 10 || r.Requests != 20 || r.Succeeded != 0 {
		t.Errorf("gave up %v requests %v succeeded %v, want 10 20 0", r.GaveUp, r.Requests, r.Succeeded)
	}
	// MaxElapsed shorter than the first wait: one call each.
	r = run(t, sim.Scenario{Clients: 10, Outage: time.Hour, Policy: retry.Policy{MaxElapsed: 500 * time.Millisecond, Jitter: retry.NoJitter()}})
	if r.GaveUp != 10 || r.Requests != 10 {
		t.Errorf("MaxElapsed: gave up %v requests %v, want 10 10", r.GaveUp, r.Requests)
	}
	// Retry-After above the policy's wait is honoured.
	r = run(t, sim.Scenario{Clients: 2, Capacity: 1, RetryAfter: 5 * time.Second, Policy: retry.Policy{Jitter: retry.NoJitter()}})
	if r.CompletionMax != 5*time.Second {
		t.Errorf("RetryAfter: completion %v, want 5s", r.CompletionMax)
	}
	// A start window spreads the first requests.
	r = run(t, sim.Scenario{Clients: 1000, Capacity: 1000, StartWindow: time.Second})
	if r.PeakLoad > 200 || len(r.Load) != 10 {
		t.Errorf("start window: peak %v slots %d, want about 100 over 10 slots", r.PeakLoad, len(r.Load))
	}
}

func TestDeterministic(t *testing.T) {
	s := sim.Scenario{Clients: 2000, Capacity: 50, Outage: 3 * time.Second, Trials: 3, Seed: 7, Policy: retry.Policy{Jitter: retry.FullJitter()}}
	a, b := run(t, s), run(t, s)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same scenario, different results")
	}
	s.Seed = 8
	if c := run(t, s); reflect.DeepEqual(a.Load, c.Load) {
		t.Error("another seed gave the same load series")
	}
}

func TestErrors(t *testing.T) {
	for name, s := range map[string]sim.Scenario{
		"Clients":   {},
		"Capacity":  {Clients: 1, Capacity: -1},
		"Slot":      {Clients: 1, Slot: -1},
		"Outage":    {Clients: 1, Outage: -1},
		"Trials":    {Clients: 1, Trials: -1},
		"LatencySD": {Clients: 1, LatencySD: -1},
		"Model":     {Clients: 1, Model: 9},
		"MaxDelay":  {Clients: 1, Policy: retry.Policy{MaxDelay: -1}},
		"Budget":    {Clients: 1, Policy: retry.Policy{Budget: new(retry.Budget)}},
	} {
		_, err := sim.Run(context.Background(), s)
		if err == nil || !strings.HasPrefix(err.Error(), "sim: ") || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v, want one starting sim: and naming %s", name, err, name)
		}
	}
	if _, err := sim.Run(context.Background(), sim.Scenario{}); !errors.Is(err, sim.ErrScenario) {
		t.Errorf("error %v does not wrap ErrScenario", err)
	}
	if _, err := sim.Run(context.Background(), sim.Scenario{Clients: 1, Policy: retry.Policy{MaxDelay: -1}}); !errors.Is(err, retry.ErrInvalidPolicy) {
		t.Errorf("error %v does not wrap ErrInvalidPolicy", err)
	}
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	s := sim.Scenario{Clients: 100000, Outage: time.Hour, Policy: retry.Policy{MaxAttempts: retry.Unlimited},
		Progress: func(done, total int64) {
			calls++
			cancel()
		}}
	if _, err := sim.Run(ctx, s); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if calls == 0 {
		t.Error("Progress never called")
	}
}

func TestModelString(t *testing.T) {
	for _, m := range []sim.Model{sim.Capacity, sim.Contention} {
		if got, err := sim.ParseModel(m.String()); err != nil || got != m {
			t.Errorf("ParseModel(%q) = %v, %v", m, got, err)
		}
	}
	if _, err := sim.ParseModel("x"); err == nil || !strings.HasPrefix(err.Error(), "sim: ") {
		t.Errorf("ParseModel(x) error %v", err)
	}
}

// Every scenario ends, or is refused up front (the hardening issue's two
// scenarios that never finished).
func TestEveryScenarioEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Time saturated: 2,600 clients, one request per 1000 h slot, waits of
	// 1000 h: serving them all would take past the end of virtual time.
	h := 1000 * time.Hour
	_, err := sim.Run(ctx, sim.Scenario{Clients: 2600, Capacity: 1, Slot: h,
		Policy: retry.Policy{Initial: h, MaxDelay: h, MaxAttempts: retry.Unlimited}})
	if !errors.Is(err, sim.ErrScenario) || !strings.Contains(err.Error(), "MaxTime") || strings.Contains(err.Error(), "\n") {
		t.Errorf("1000 h slots: error %v, want one line naming MaxTime", err)
	}
	// The same with fewer clients fits in virtual time and succeeds.
	r, err := sim.Run(ctx, sim.Scenario{Clients: 1000, Capacity: 1, Slot: h,
		Policy: retry.Policy{Initial: h, MaxDelay: h, MaxAttempts: retry.Unlimited}})
	if err != nil || r.Succeeded != 1000 {
		t.Errorf("1,000 clients: %v, succeeded %v", err, r.Succeeded)
	}
	// Zero waits and unlimited attempts, with and without MaxElapsed, and
	// with a budget whose floor would never run out: refused before
	// running.
	for _, b := range []*retry.BudgetConfig{nil, {MinPerSecond: 1e300}} {
		for _, me := range []time.Duration{0, 5 * time.Second} {
			start := time.Now()
			_, err := sim.Run(ctx, sim.Scenario{Clients: 10000, Outage: time.Second, Budget: b,
				Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: retry.Unlimited, MaxElapsed: me}})
			if !errors.Is(err, sim.ErrScenario) || !strings.Contains(err.Error(), "Initial") ||
				!strings.Contains(err.Error(), "MaxAttempts") || time.Since(start) > 5*time.Second { // up front, not run
				t.Errorf("zero waits, MaxElapsed %v, budget %v: error %v", me, b, err)
			}
		}
	}
	// Zero waits with a finite limit end at once: each refused client
	// sends all its attempts at one instant.
	r, err = sim.Run(ctx, sim.Scenario{Clients: 10000, Outage: time.Second,
		Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 1 << 40}})
	if err != nil || r.GaveUp != 10000 || r.Requests != 10000*math.MaxInt32 || r.PeakLoad != 10000*math.MaxInt32 {
		t.Errorf("zero waits, 2^40 attempts: %v, gave up %v requests %v peak %v", err, r.GaveUp, r.Requests, r.PeakLoad)
	}
	// ... or until the server takes them, when a Retry-After moves them on.
	r, err = sim.Run(ctx, sim.Scenario{Clients: 300, Capacity: 100, RetryAfter: time.Second,
		Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: retry.Unlimited}})
	if err != nil || r.Succeeded != 300 || r.Requests != 300+200+100 {
		t.Errorf("zero waits with Retry-After: %v, succeeded %v requests %v", err, r.Succeeded, r.Requests)
	}
	// Waits of 1 ns through an hour's outage: 3.6e12 requests per client,
	// refused up front.
	start := time.Now()
	_, err = sim.Run(ctx, sim.Scenario{Clients: 10000, Outage: time.Hour,
		Policy: retry.Policy{Initial: 1, MaxDelay: 1, MaxAttempts: retry.Unlimited}})
	if !errors.Is(err, sim.ErrScenario) || !strings.Contains(err.Error(), "MaxRequests") || time.Since(start) > 5*time.Second { // up front, not run
		t.Errorf("1 ns waits through an hour's outage: error %v", err)
	}
	// ... also with a budget too generous to stop anyone.
	_, err = sim.Run(ctx, sim.Scenario{Clients: 10000, Outage: time.Hour, Budget: &retry.BudgetConfig{MinPerSecond: 1e300},
		Policy: retry.Policy{Initial: 1, MaxDelay: 1, MaxAttempts: retry.Unlimited}})
	if !errors.Is(err, sim.ErrScenario) || !strings.Contains(err.Error(), "MaxRequests") {
		t.Errorf("1 ns waits, a boundless budget: error %v", err)
	}
	// Work within the bound for one trial is refused when the trials
	// together pass it, and so is any run of more clients × trials.
	_, err = sim.Run(ctx, sim.Scenario{Clients: 100, Outage: 1000 * time.Hour, Trials: 1000,
		Policy: retry.Policy{Initial: time.Millisecond, MaxDelay: time.Millisecond, MaxAttempts: retry.Unlimited}})
	if !errors.Is(err, sim.ErrScenario) || !strings.Contains(err.Error(), "1000 trials") {
		t.Errorf("1 ms waits through 1000 h, 1000 trials: error %v", err)
	}
	_, err = sim.Run(ctx, sim.Scenario{Clients: 100_000, Trials: 1_000_000_000})
	if !errors.Is(err, sim.ErrScenario) || !strings.Contains(err.Error(), "MaxRequests") {
		t.Errorf("1e5 clients in 1e9 trials: error %v", err)
	}
	// The same with no outage but one request per second served.
	_, err = sim.Run(ctx, sim.Scenario{Clients: 10000, Capacity: 1, Slot: time.Second,
		Policy: retry.Policy{Initial: 1, MaxDelay: 1, MaxAttempts: retry.Unlimited}})
	if !errors.Is(err, sim.ErrScenario) || !strings.Contains(err.Error(), "MaxRequests") {
		t.Errorf("1 ns waits, one request per second served: error %v", err)
	}
	// Contention: the time saturates too, and ends the same way.
	_, err = sim.Run(ctx, sim.Scenario{Model: sim.Contention, Clients: 3, Latency: h, LatencySD: h,
		Policy: retry.Policy{Initial: h, MaxDelay: h, MaxAttempts: retry.Unlimited}})
	if err != nil && !errors.Is(err, sim.ErrScenario) {
		t.Errorf("contention with 1000 h delays: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("a scenario did not end within 30 s")
	}
}

// PeakLoad counts the requests past the end of the Load series.
func TestPeakLoadPastCut(t *testing.T) {
	// Three clients spread over 1 s of 1 ns slots, all during an outage,
	// each sending its 7 attempts at once (no waits): 7 requests in each
	// of three slots, almost surely beyond the 2^20 ns of the series.
	r := run(t, sim.Scenario{Clients: 3, Slot: 1, StartWindow: time.Second, Outage: 2 * time.Second, Seed: 1,
		Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 7}})
	sum := 0
	for _, n := range r.Load {
		sum += n
	}
	if r.PeakLoad != 7 || r.Requests != 21 || len(r.Load) > sim.MaxLoadSlots || sum == 21 || !r.LoadCut {
		t.Errorf("peak %v requests %v, load series of %d slots holding %d, LoadCut %v: want peak 7 past the cut, reported",
			r.PeakLoad, r.Requests, len(r.Load), sum, r.LoadCut)
	}
	// Every call within the series: not cut.
	r = run(t, sim.Scenario{Clients: 3, Outage: 2 * time.Second, Seed: 1, Policy: retry.Policy{MaxAttempts: 7}})
	if r.LoadCut {
		t.Errorf("a run of %d slots reports its load series cut", len(r.Load))
	}
}

// The server accepts the earliest Capacity arrivals of a slot, even when
// they were scheduled in another order (here client order, with random
// start times).
func TestCapacityArrivalOrder(t *testing.T) {
	s := sim.Scenario{Clients: 6, Capacity: 3, Slot: 10 * time.Second, StartWindow: 10 * time.Second, Seed: 5,
		Policy: retry.Policy{MaxAttempts: 1}}
	r := run(t, s)
	s.Capacity = 6
	all := run(t, s) // every client succeeds at its start time
	// The last accepted is the third-earliest start, the median of six.
	if r.Succeeded != 3 || all.Succeeded != 6 || r.CompletionMax != all.CompletionP50 {
		t.Errorf("accepted %v, last at %v; the third-earliest of %v starts is at %v",
			r.Succeeded, r.CompletionMax, all.Succeeded, all.CompletionP50)
	}
}

// cancelled returns a context that has already ended.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// Run checks ctx every few thousand events however they are split into
// trials: a run of many one-client trials is cancelled too (it used to
// count events per trial, so that a trial of under 4,096 never looked).
func TestCancelManySmallTrials(t *testing.T) {
	for _, m := range []sim.Model{sim.Capacity, sim.Contention} {
		start := time.Now()
		_, err := sim.Run(cancelled(), sim.Scenario{Model: m, Clients: 1, Trials: 10_000_000})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%v: got %v, want context.Canceled", m, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%v: cancelled after %v", m, d)
		}
	}
}

// The completion percentiles are averaged over the trials in which a
// client succeeded: a trial in which nobody did adds no zero.
func TestCompletionOverTrialsWithSuccess(t *testing.T) {
	// One client, one attempt, starting in [0, 2 s) against a server that
	// is down for the first second: it succeeds in about half the trials,
	// each time at or after 1 s.
	s := sim.Scenario{Clients: 1, StartWindow: 2 * time.Second, Outage: time.Second, Trials: 100, Seed: 1,
		Policy: retry.Policy{MaxAttempts: 1}}
	r := run(t, s)
	if r.Succeeded == 0 || r.Succeeded == 1 {
		t.Fatalf("succeeded %v: want a success in some trials, not all", r.Succeeded)
	}
	if r.CompletionP50 < s.Outage || r.CompletionP99 < s.Outage || r.CompletionMax < s.Outage ||
		r.CompletionMax >= s.StartWindow {
		t.Errorf("succeeded %v: completion p50 %v p99 %v max %v, want each in [%v, %v)",
			r.Succeeded, r.CompletionP50, r.CompletionP99, r.CompletionMax, s.Outage, s.StartWindow)
	}
	// Nobody ever succeeds: all zero.
	s.Outage = sim.MaxDuration
	if r := run(t, s); r.Succeeded != 0 || r.CompletionP50 != 0 || r.CompletionMax != 0 {
		t.Errorf("no success: succeeded %v, completion p50 %v max %v, want 0", r.Succeeded, r.CompletionP50, r.CompletionMax)
	}
}

// Validate makes exactly the checks Run makes before it starts.
func TestValidate(t *testing.T) {
	for name, s := range map[string]sim.Scenario{
		"ok":        {Clients: 100, Outage: time.Second},
		"fleet":     {Clients: 100, Outage: sim.MaxDuration, Processes: 4, Budget: &retry.BudgetConfig{}},
		"Clients":   {},
		"Capacity":  {Clients: 1, Capacity: -1},
		"Model":     {Clients: 1, Model: 9},
		"MaxDelay":  {Clients: 1, Policy: retry.Policy{MaxDelay: -1}},
		"Budget":    {Clients: 1, Budget: &retry.BudgetConfig{Window: time.Microsecond}},
		"Immediate": {Clients: 10, Outage: time.Second, Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: retry.Unlimited}},
		"work":      {Clients: 10000, Outage: time.Hour, Policy: retry.Policy{Initial: 1, MaxDelay: 1, MaxAttempts: retry.Unlimited}},
		"trials":    {Clients: 100_000, Trials: 1_000_000_000},
		"memory":    {Clients: 1_000_000, MaxMemory: 8 << 20},
	} {
		v := s.Validate()
		_, err := sim.Run(context.Background(), s)
		switch {
		case name == "ok" || name == "fleet":
			if v != nil || err != nil {
				t.Errorf("%s: Validate %v, Run %v: want nil", name, v, err)
			}
		case v == nil || err == nil || v.Error() != err.Error() || !strings.HasPrefix(v.Error(), "sim: "):
			t.Errorf("%s: Validate %v, Run %v: want the same error", name, v, err)
		case !errors.Is(v, sim.ErrScenario) && !errors.Is(v, retry.ErrInvalidPolicy):
			t.Errorf("%s: Validate %v wraps neither ErrScenario nor ErrInvalidPolicy", name, v)
		}
	}
}
