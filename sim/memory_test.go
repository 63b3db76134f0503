package sim_test

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sim"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// A scenario that cannot fit is refused before it allocates anything.
func TestMaxMemoryRefused(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err := sim.Run(context.Background(), sim.Scenario{Clients: 200_000_000})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, sim.ErrScenario) || !contains(err.Error(), "MaxMemory 4.0 GiB") || contains(err.Error(), "\n") {
		t.Fatalf("error %v, want one line naming MaxMemory", err)
	}
	if d := time.Since(start); d > 5*time.Second { // up front, not run
		t.Errorf("refused after %v", d)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("allocated %d bytes before refusing", grew)
	}
	// A smaller limit refuses smaller scenarios; a negative one none.
	if _, err := sim.Run(context.Background(), sim.Scenario{Clients: 1_000_000, MaxMemory: 8 << 20}); !errors.Is(err, sim.ErrScenario) {
		t.Errorf("1e6 clients in 8 MiB: %v", err)
	}
	if _, err := sim.Run(context.Background(), sim.Scenario{Clients: 1000, MaxMemory: -1}); err != nil {
		t.Errorf("no limit: %v", err)
	}
}

// The memory a run holds grows by a few tens of bytes per client, below
// the estimate Run checks against MaxMemory.
func TestMemoryPerClient(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	peak := func(clients int) uint64 {
		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		var top uint64
		s := sim.Scenario{Clients: clients, Capacity: 100, Outage: 5 * time.Second,
			Policy: retry.Policy{Jitter: retry.FullJitter(), MaxAttempts: 4},
			Progress: func(done, total int64) {
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				top = max(top, m.HeapInuse)
			}}
		run(t, s)
		return top - min(top, base.HeapInuse)
	}
	small, large := peak(100_000), peak(400_000)
	perClient := float64(large-small) / 300_000
	t.Logf("heap in use: %d B at 1e5 clients, %d B at 4e5: %.1f B per client", small, large, perClient)
	if perClient > 48 {
		t.Errorf("%.1f B per client, want at most 48", perClient)
	}
}

// The memory estimate saturates: a MaxElapsed near math.MaxInt64 added to
// the StartWindow used to wrap negative and pass MaxMemory. Run validates
// before it looks at ctx, so a cancelled one shows what it accepted.
func TestMemoryEstimateSaturates(t *testing.T) {
	for _, me := range []time.Duration{time.Hour, math.MaxInt64, math.MaxInt64 - 1, sim.MaxTime} {
		s := sim.Scenario{Clients: 1_000_000, StartWindow: 1, MaxMemory: 1 << 20,
			Policy: retry.Policy{MaxAttempts: retry.Unlimited, MaxElapsed: me}}
		if _, err := sim.Run(cancelled(), s); !errors.Is(err, sim.ErrScenario) || !contains(err.Error(), "MaxMemory") {
			t.Errorf("MaxElapsed %v: error %v, want one wrapping ErrScenario naming MaxMemory", me, err)
		}
		// The largest StartWindow too.
		s.StartWindow = sim.MaxDuration
		if err := s.Validate(); !errors.Is(err, sim.ErrScenario) || !contains(err.Error(), "MaxMemory") {
			t.Errorf("MaxElapsed %v, StartWindow %v: error %v, want one naming MaxMemory", me, s.StartWindow, err)
		}
	}
}
