package sim_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sim"
)

func runHedge(t *testing.T, s sim.HedgeScenario) sim.HedgeResult {
	t.Helper()
	r, err := sim.RunHedge(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRunHedgeDeterministic(t *testing.T) {
	s := sim.HedgeScenario{Requests: 5000, Latency: sim.Latency{Stragglers: 0.05}, Seed: 7,
		Hedge: &retry.HedgeConfig{Quantile: 0.9}, Budget: &retry.BudgetConfig{}}
	if a, b := runHedge(t, s), runHedge(t, s); a != b {
		t.Errorf("two runs differ: %+v, %+v", a, b)
	}
	s.Seed = 8
	if a, b := runHedge(t, s), runHedge(t, sim.HedgeScenario{Requests: 5000, Latency: sim.Latency{Stragglers: 0.05}, Seed: 7,
		Hedge: &retry.HedgeConfig{Quantile: 0.9}, Budget: &retry.BudgetConfig{}}); a == b {
		t.Error("another seed gives the same result")
	}
}

func TestRunHedgeNoHedging(t *testing.T) {
	r := runHedge(t, sim.HedgeScenario{Requests: 1000, Latency: sim.Latency{Sigma: -1, Mean: 3 * time.Millisecond}})
	if r.Copies != 1000 || r.Extra != 0 || r.P50 != 3*time.Millisecond || r.Max != 3*time.Millisecond {
		t.Errorf("got %+v; want 1000 copies of exactly 3ms", r)
	}
}

// The Tail at Scale's shape (1 % of copies take 1 s): a hedge at the p95
// cuts p99.9 more than 10x for about 5 % more copies.
func TestRunHedgeHeavyTail(t *testing.T) {
	s := sim.HedgeScenario{Requests: 20000, Latency: sim.Latency{Tail: 0.01}}
	none := runHedge(t, s)
	s.Hedge = &retry.HedgeConfig{FixedDelay: 11 * time.Millisecond, MaxCopies: 2}
	h := runHedge(t, s)
	if none.P999 != time.Second || h.P999*10 > none.P999 || h.Extra > 0.06 {
		t.Errorf("p99.9 %v -> %v at %.3f extra; want >10x lower at <= 6%%", none.P999, h.P999, h.Extra)
	}
}

// A slow-everything outage: without a budget every request sends its
// hedge (load doubles); the default Budget holds the extra load to 10 %.
func TestRunHedgeOutageBoundedByBudget(t *testing.T) {
	s := sim.HedgeScenario{Requests: 20000, Correlated: 1, Hedge: &retry.HedgeConfig{FixedDelay: 10 * time.Millisecond, MaxCopies: 2}}
	free := runHedge(t, s)
	s.Budget = &retry.BudgetConfig{}
	capped := runHedge(t, s)
	if free.Extra < 0.95 || capped.Extra > 0.105 || capped.Refused == 0 {
		t.Errorf("extra load %.3f without a budget, %.3f with (%d refused); want ~1 and <= 0.1", free.Extra, capped.Extra, capped.Refused)
	}
}

func TestHedgeCurve(t *testing.T) {
	pts, err := sim.HedgeCurve(context.Background(), sim.HedgeScenario{Requests: 5000, Latency: sim.Latency{Stragglers: 0.05}},
		[]float64{0.9, 0.99}, &retry.BudgetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 1+2*2*2 || pts[0].Name != "none" || !strings.HasPrefix(pts[1].Name, "fixed p90 (") || pts[2].Name != "adaptive p90" ||
		pts[len(pts)-1].Name != "adaptive p99 +budget" {
		t.Fatalf("points %v", pts)
	}
	// A lower delay hedges more.
	if pts[1].Result.Extra <= pts[3].Result.Extra {
		t.Errorf("extra at p90 %.3f, at p99 %.3f", pts[1].Result.Extra, pts[3].Result.Extra)
	}
	if _, err := sim.HedgeCurve(context.Background(), sim.HedgeScenario{}, []float64{1}, nil); err == nil {
		t.Error("quantile 1 accepted")
	}
}

func TestRunHedgeBadScenario(t *testing.T) {
	for _, s := range []sim.HedgeScenario{
		{Requests: -1},
		{Rate: -1},
		{Latency: sim.Latency{Mean: -1}},
		{Latency: sim.Latency{Stragglers: 2}},
		{Latency: sim.Latency{Tail: -0.1}},
		{Correlated: 1.5},
		{SlowPeriod: -1},
		{Hedge: &retry.HedgeConfig{FixedDelay: -1}},
		{Hedge: &retry.HedgeConfig{MaxCopies: 17}},
		{Budget: &retry.BudgetConfig{Window: time.Microsecond}},
	} {
		if _, err := sim.RunHedge(context.Background(), s); !errors.Is(err, sim.ErrScenario) || !strings.HasPrefix(err.Error(), "sim: ") {
			t.Errorf("RunHedge(%+v) = %v; want an ErrScenario starting with sim:", s, err)
		}
	}
}

// Virtual time cannot wrap: arrivals spread over more than about 73 years
// are refused, as are rates beyond one request per nanosecond and runs
// over MaxMemory; a run just inside the span gets every hedge its budget's
// floor grants (a wrapped clock refused some).
func TestRunHedgeTimeAndMemoryBounds(t *testing.T) {
	for _, c := range []struct {
		s    sim.HedgeScenario
		want string
	}{
		{sim.HedgeScenario{Rate: 1e-6, Requests: 100000}, "over the model's"},
		{sim.HedgeScenario{Rate: 1e-300, Requests: 2}, "over the model's"},
		{sim.HedgeScenario{Rate: 2e9}, "one request per nanosecond"},
		{sim.HedgeScenario{Requests: 10_000_000, MaxMemory: 1 << 30}, "over MaxMemory 1.0 GiB"},
	} {
		if err := c.s.Validate(); !errors.Is(err, sim.ErrScenario) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rate %v, %d requests: %v, want %q", c.s.Rate, c.s.Requests, err, c.want)
		}
	}
	s := sim.HedgeScenario{Rate: 1e-6, Requests: 1000, Latency: sim.Latency{Sigma: -1, Mean: 10 * time.Millisecond},
		Hedge: &retry.HedgeConfig{FixedDelay: 5 * time.Millisecond, MaxCopies: 2}, Budget: &retry.BudgetConfig{Ratio: 0.1}}
	if r := runHedge(t, s); r.Refused != 0 || r.Copies != 2000 || r.P50 != 10*time.Millisecond {
		t.Errorf("one request every 11.6 days: %+v, want every hedge granted", r)
	}
}
