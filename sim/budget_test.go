package sim_test

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sim"
)

// dead is a backend that fails every request for the whole run.
func dead(clients int, p retry.Policy) sim.Scenario {
	return sim.Scenario{Clients: clients, Outage: sim.MaxDuration, Policy: p}
}

// The ratio alone: 10 first attempts earn 5 retries; the other five
// clients are refused at once, and the five that retried are refused next.
func TestBudgetRatio(t *testing.T) {
	s := dead(10, retry.Policy{Jitter: retry.NoJitter(), MaxAttempts: retry.Unlimited})
	s.Budget = &retry.BudgetConfig{Ratio: 0.5, MinPerSecond: -1}
	r := run(t, s)
	if r.Requests != 15 || r.BudgetRefused != 10 || r.GaveUp != 10 || r.Budget != "local" || r.Processes != 1 {
		t.Errorf("requests %v refused %v gave up %v budget %q processes %d; want 15 10 10 local 1",
			r.Requests, r.BudgetRefused, r.GaveUp, r.Budget, r.Processes)
	}
}

// The floor: MinPerSecond × Window retries per window, per budget. Four
// processes with a budget each get four times the floor of one shared
// budget.
func TestBudgetFloorLocalShared(t *testing.T) {
	s := dead(100, retry.Policy{Jitter: retry.NoJitter(), MaxAttempts: retry.Unlimited})
	s.Budget = &retry.BudgetConfig{Ratio: -1, MinPerSecond: 1, Window: 10 * time.Second}
	one := run(t, s)
	s.Processes = 4
	local := run(t, s)
	s.SharedBudget = true
	shared := run(t, s)
	for _, c := range []struct {
		name string
		r    sim.Result
		want float64
	}{{"one process", one, 110}, {"4 local", local, 140}, {"4 shared", shared, 110}} {
		if c.r.Requests != c.want || c.r.BudgetRefused != 100 {
			t.Errorf("%s: requests %v refused %v, want %v and 100", c.name, c.r.Requests, c.r.BudgetRefused, c.want)
		}
	}
	if shared.Budget != "shared" || local.Budget != "local" {
		t.Errorf("budget %q / %q", shared.Budget, local.Budget)
	}
}

// The window forgets: after Window, the reserve is back.
func TestBudgetWindowRefills(t *testing.T) {
	// One client, retrying every 3 s against a dead backend; a reserve of
	// 2 retries per 10 s window and no ratio: it is granted retries at 3 s
	// and 6 s, refused at 9 s.
	s := dead(1, retry.Policy{Initial: 3 * time.Second, Multiplier: 1, Jitter: retry.NoJitter(), MaxAttempts: retry.Unlimited})
	s.Budget = &retry.BudgetConfig{Ratio: -1, MinPerSecond: 0.2, Window: 10 * time.Second}
	r := run(t, s)
	if r.Requests != 3 || r.BudgetRefused != 1 {
		t.Errorf("requests %v refused %v, want 3 and 1", r.Requests, r.BudgetRefused)
	}
	// Retrying every 6 s, at most two retries are ever in the window (the
	// one at 0 s is forgotten by 12 s): it keeps going until MaxAttempts.
	s.Policy.Initial, s.Policy.MaxDelay, s.Policy.MaxAttempts = 6*time.Second, 6*time.Second, 8
	r = run(t, s)
	if r.Requests != 8 || r.BudgetRefused != 0 {
		t.Errorf("every 6 s: requests %v refused %v, want 8 and 0", r.Requests, r.BudgetRefused)
	}
}

// A fleet of quiet processes against a dead backend: the retries the
// fleet sends stay within the documented bound with one shared budget and
// grow with the number of processes with local ones.
func TestFleetBound(t *testing.T) {
	const (
		clients = 2000
		procs   = 100
		spread  = 100 * time.Second
	)
	s := dead(clients, retry.Policy{Initial: 100 * time.Millisecond, MaxDelay: time.Second, Jitter: retry.FullJitter(),
		MaxAttempts: retry.Unlimited, MaxElapsed: 30 * time.Second})
	s.StartWindow, s.Processes, s.Seed = spread, procs, 3
	s.Budget = &retry.BudgetConfig{} // the defaults: 10 %, 1 per second, 10 s
	local := run(t, s)
	s.SharedBudget = true
	shared := run(t, s)
	// Every request is sent within StartWindow + MaxElapsed.
	span := (spread + 30*time.Second).Seconds()
	bound := 0.1*clients + 1*(span+2*10)
	lr, sr := local.Requests-clients, shared.Requests-clients
	t.Logf("retries: %d local budgets %.0f, one shared %.0f (bound %.0f)", procs, lr, sr, bound)
	if sr > bound {
		t.Errorf("shared budget: %.0f retries, over the bound %.0f", sr, bound)
	}
	if lr < 5*sr {
		t.Errorf("local budgets: %.0f retries, want far more than shared %.0f", lr, sr)
	}
	// Deterministic, trial after trial.
	s.Trials = 3
	if a, b := run(t, s), run(t, s); !reflect.DeepEqual(a, b) {
		t.Error("same fleet scenario, different results")
	}
}

func TestBudgetErrors(t *testing.T) {
	for name, s := range map[string]sim.Scenario{
		"Budget.Ratio":    {Clients: 1, Budget: &retry.BudgetConfig{Ratio: math.NaN()}},
		"Budget.Window":   {Clients: 1, Budget: &retry.BudgetConfig{Window: time.Microsecond}},
		"Processes":       {Clients: 2, Processes: 3},
		"SharedBudget":    {Clients: 2, SharedBudget: true},
		"Policy.Throttle": {Clients: 1, Policy: retry.Policy{Throttle: new(retry.Throttle)}},
	} {
		_, err := sim.Run(context.Background(), s)
		if err == nil || !contains(err.Error(), name) {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

// The contention model honours the budget too: writes that lost the race
// are retried only while the budget allows.
func TestBudgetContention(t *testing.T) {
	s := study(retry.FullJitter(), 1)
	free := run(t, s)
	s.Budget = &retry.BudgetConfig{Ratio: -1, MinPerSecond: 1, Window: 10 * time.Second}
	r := run(t, s)
	t.Logf("with a budget: %v retries, %v refused, %v succeeded by %v; without: %v retries",
		r.Requests-100, r.BudgetRefused, r.Succeeded, r.CompletionMax, free.Requests-100)
	// A reserve of 10 retries per 10 s; the run lasts a few seconds.
	if retries := r.Requests - 100; retries > 10*(r.CompletionMax.Seconds()/10+2) || r.BudgetRefused == 0 ||
		r.Succeeded+r.GaveUp != 100 || retries >= free.Requests-100 {
		t.Errorf("with a budget: %v retries, %v refused, %v succeeded; without: %v retries",
			retries, r.BudgetRefused, r.Succeeded, free.Requests-100)
	}
}

// A budget exempts a run from the up-front work bound only if all it can
// grant over the whole run, its floor in every window included, keeps the
// run within MaxRequests; zero waits with a budget are simulated retry by
// retry, and are bounded as such. Run validates before it looks at ctx.
func TestBudgetWorkBound(t *testing.T) {
	for name, s := range map[string]sim.Scenario{
		// 10^8 retries a second for 1000 h would be granted: 3.6e14.
		"floor every window": {Clients: 1, Outage: sim.MaxDuration, Budget: &retry.BudgetConfig{MinPerSecond: 1e8},
			Policy: retry.Policy{Initial: 20, MaxDelay: 20, MaxAttempts: retry.Unlimited}},
		// 1,000 clients sending 2^31−1 attempts each at one instant, one
		// by one since each asks a budget that grants 10^9 per request.
		"zero waits": {Clients: 1000, Outage: time.Hour, Budget: &retry.BudgetConfig{Ratio: 1e9},
			Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: math.MaxInt32}},
		// The same, the clients' first requests refused for capacity.
		"zero waits, capacity": {Clients: 1000, Capacity: 10, Budget: &retry.BudgetConfig{Ratio: 1e9},
			Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: math.MaxInt32}},
		// 1,000 local floors of 10^7 a second for 1000 h.
		"fleet of floors": {Clients: 1000, Processes: 1000, Outage: sim.MaxDuration, Budget: &retry.BudgetConfig{MinPerSecond: 1e7},
			Policy: retry.Policy{Initial: time.Microsecond, MaxDelay: time.Microsecond, MaxAttempts: retry.Unlimited}},
	} {
		_, err := sim.Run(cancelled(), s)
		if !errors.Is(err, sim.ErrScenario) || !contains(err.Error(), "MaxRequests") {
			t.Errorf("%s: error %v, want one wrapping ErrScenario naming MaxRequests", name, err)
		}
	}
	// Budgets that do bound the run are still relied on: these end at
	// once, every client stopped by the budget.
	for name, s := range map[string]sim.Scenario{
		"1 ns waits": {Clients: 1000, Outage: time.Hour, Budget: &retry.BudgetConfig{},
			Policy: retry.Policy{Initial: 1, MaxDelay: 1, MaxAttempts: retry.Unlimited}},
		"zero waits": {Clients: 1000, Outage: time.Hour, Budget: &retry.BudgetConfig{},
			Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: math.MaxInt32}},
		"one shared floor": {Clients: 1000, Processes: 1000, SharedBudget: true, Outage: sim.MaxDuration,
			Budget: &retry.BudgetConfig{Ratio: -1, MinPerSecond: 1}, Policy: retry.Policy{MaxAttempts: retry.Unlimited}},
	} {
		r, err := sim.Run(context.Background(), s)
		if err != nil || r.BudgetRefused != 1000 {
			t.Errorf("%s: %v, %v refused by the budget: want all 1000", name, err, r.BudgetRefused)
		}
	}
	// 1000 budgets' floors over MaxTime would pass MaxRequests, and the
	// clients would send 3.6e12 requests without them; but the run ends
	// soon after the outage, once the server has served every client (see
	// lastSlot), so the floors last that long only: accepted (the CLI
	// runs it in a fraction of a second, every client stopped by its
	// budget).
	s := sim.Scenario{Clients: 1_000_000, Processes: 1000, Outage: time.Hour, Budget: &retry.BudgetConfig{},
		Policy: retry.Policy{Initial: time.Millisecond, MaxDelay: time.Millisecond, Jitter: retry.FullJitter(), MaxAttempts: retry.Unlimited}}
	if err := s.Validate(); err != nil {
		t.Errorf("1000 local floors over a 1 h outage: %v, want accepted", err)
	}
	// Without its budget the 1 ns waits are refused; zero waits are then
	// counted in one step per client, and accepted.
	s = sim.Scenario{Clients: 1000, Outage: time.Hour, Policy: retry.Policy{Initial: 1, MaxDelay: 1, MaxAttempts: retry.Unlimited}}
	if err := s.Validate(); !errors.Is(err, sim.ErrScenario) {
		t.Errorf("1 ns waits without a budget: %v, want refused", err)
	}
	s.Policy = retry.Policy{Initial: retry.Immediate, MaxAttempts: math.MaxInt32}
	if r, err := sim.Run(context.Background(), s); err != nil || r.Requests != 1000*math.MaxInt32 {
		t.Errorf("zero waits without a budget: %v, %v requests", err, r.Requests)
	}
}

// In the contention model the budget sees first attempts and retry
// decisions in time order, as retry.Budget would: a retry is decided when
// the failed write's answer arrives. Here 50 clients write at about 30 ms,
// the answers arrive at about 40 ms, and a window of 1 ms has forgotten
// every first attempt by then: with no floor, no retry is granted. (Asked
// at the answer's time while the writes were processed in arrival order,
// the budget used to date later first attempts into the newest slot and
// grant nearly every retry.)
func TestBudgetContentionTimeOrder(t *testing.T) {
	s := sim.Scenario{Model: sim.Contention, Clients: 50, Latency: 10 * time.Millisecond, LatencySD: time.Nanosecond, Seed: 1,
		Policy: retry.Policy{Initial: time.Millisecond, MaxDelay: time.Millisecond, Jitter: retry.NoJitter(), MaxAttempts: retry.Unlimited},
		Budget: &retry.BudgetConfig{Ratio: 1, MinPerSecond: -1, Window: time.Millisecond}}
	r := run(t, s)
	if retries := r.Requests - float64(r.Clients); retries != 0 || r.Succeeded != 1 || r.BudgetRefused != 49 {
		t.Errorf("%v retries, %v succeeded, %v refused: want 0, 1, 49", retries, r.Succeeded, r.BudgetRefused)
	}
	// With a window of 1 s the 50 first attempts are still counted when
	// the answers arrive: Ratio 1 grants 50 retries, 49 in the first round
	// (one client won), the last to one of the 48 that lose the second;
	// the 47 others are refused, and the client granted it wins the third.
	s.Budget.Window = time.Second
	r = run(t, s)
	if retries := r.Requests - float64(r.Clients); retries != 50 || r.Succeeded != 3 || r.BudgetRefused != 47 {
		t.Errorf("window 1 s: %v retries, %v succeeded, %v refused: want 50, 3, 47", retries, r.Succeeded, r.BudgetRefused)
	}
	if a, b := run(t, s), run(t, s); !reflect.DeepEqual(a, b) {
		t.Error("same scenario, different results")
	}
}
