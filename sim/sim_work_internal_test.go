package sim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// A run ends with an error once it has processed more than MaxRequests
// requests (here a lower bound, through simulate), all trials together,
// in both models; requests counted in one step (zero waits, no budget)
// are not work.
func TestWorkGuard(t *testing.T) {
	// The study's "no jitter" row: about 1,860 writes per trial.
	contention := Scenario{Model: Contention, Clients: 100, Seed: 1,
		Policy: retry.Policy{Initial: 10 * time.Millisecond, MaxDelay: 2 * time.Second, Jitter: retry.NoJitter(), MaxAttempts: retry.Unlimited}}
	// 1 ms waits through a 10 s outage: about 10^4 requests per client.
	capacity := Scenario{Clients: 100, Outage: 10 * time.Second,
		Policy: retry.Policy{Initial: time.Millisecond, MaxDelay: time.Millisecond, MaxAttempts: retry.Unlimited}}
	for name, c := range map[string]struct {
		s       Scenario
		trials  int
		maxWork float64
		fails   bool
	}{
		"contention, one trial within":     {contention, 1, 5000, false},
		"contention, ten trials over":      {contention, 10, 5000, true},
		"contention, ten trials within":    {contention, 10, 50000, false},
		"capacity, one trial over":         {capacity, 1, 100_000, true},
		"capacity, one trial within":       {capacity, 1, 2_000_000, false},
		"capacity, trials over":            {capacity, 3, 2_000_000, true},
		"capacity, zero waits not work":    {Scenario{Clients: 10000, Outage: time.Second, Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 1 << 40}}, 1, 20_000, false},
		"capacity, zero waits budget over": {Scenario{Clients: 100, Outage: time.Second, Budget: &retry.BudgetConfig{MinPerSecond: 1e6}, Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 1 << 40}}, 1, 20_000, true},
	} {
		c.s.Trials = c.trials
		r, err := simulate(t.Context(), c.s, c.maxWork)
		switch {
		case c.fails && (!errors.Is(err, ErrScenario) || !strings.Contains(err.Error(), "over MaxRequests") ||
			!strings.HasPrefix(err.Error(), "sim: ")):
			t.Errorf("%s: error %v, want one wrapping ErrScenario naming MaxRequests", name, err)
		case !c.fails && err != nil:
			t.Errorf("%s: %v (%v requests per trial)", name, err, r.Requests)
		}
	}
}

// The open model's run-time bound: a run whose estimate passed (here
// forced past it) ends with an error once it has simulated more than
// MaxWork attempts one by one.
func TestOpenWorkGuard(t *testing.T) {
	s := OpenScenario{Rate: 1000, ServiceRate: 500, Timeout: 100 * time.Millisecond, Duration: time.Minute,
		Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 5}}
	if err := s.resolve(); err != nil {
		t.Fatal(err)
	}
	s.MaxWork = 50000 // the estimate is 3e5
	e := newOpenEngine(&s, context.Background())
	err := e.run()
	if !errors.Is(err, ErrScenario) || !strings.Contains(err.Error(), "simulated over MaxWork (5e+04)") || e.simulated > 60000 {
		t.Errorf("%v after %.0f attempts", err, e.simulated)
	}
}
