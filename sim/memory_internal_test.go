package sim

import (
	"context"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// A capacity-model run whose slots hold more requests than Capacity
// allocates no more than the estimate Run checks against MaxMemory: the
// selection heap is made at its full size once, not grown by copying.
func TestCapacityHeapWithinEstimate(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	// All requests in one slot, one more than the server takes.
	s := Scenario{Clients: 400_000, Capacity: 399_999, Slot: 1000 * time.Hour,
		Policy: retry.Policy{Initial: 1000 * time.Hour, MaxDelay: 1000 * time.Hour, MaxAttempts: 4}}
	r := s
	if err := r.resolve(); err != nil {
		t.Fatal(err)
	}
	est := r.memory()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := Run(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if grew := int64(after.TotalAlloc - before.TotalAlloc); grew > est {
		t.Errorf("allocated %s in all, over the estimate of %s", byteSize(grew), byteSize(est))
	}
}

// lastSlot bounds the last slot in which a capacity-model client acts: on
// random small scenarios (budgets, hints, stops, capacity below the
// clients), trial 0's last slot with a call is never past it.
func TestLastSlotBoundsTheRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	jitters := []retry.Jitter{retry.NoJitter(), retry.FullJitter(), retry.EqualJitter(), retry.DecorrelatedJitter(), {}}
	checked := 0
	for range 400 {
		slot := time.Duration(1+rng.IntN(50)) * time.Millisecond
		s := Scenario{
			Clients:     1 + rng.IntN(300),
			Capacity:    1 + rng.IntN(40),
			Slot:        slot,
			Outage:      time.Duration(rng.IntN(3000)) * time.Millisecond,
			StartWindow: time.Duration(rng.IntN(2000)) * time.Millisecond,
			Seed:        rng.Uint64(),
			Policy: retry.Policy{
				Initial:     time.Duration(1+rng.IntN(5)) * time.Millisecond,
				MaxDelay:    time.Duration(5+rng.IntN(900)) * time.Millisecond,
				Jitter:      jitters[rng.IntN(len(jitters))],
				MaxAttempts: []int{retry.Unlimited, 3, 20}[rng.IntN(3)],
			},
		}
		switch rng.IntN(4) {
		case 0: // a server's wait, often longer than the policy's
			s.RetryAfter = time.Duration(rng.IntN(500)) * time.Millisecond
		case 1: // zero waits: every client acts at its start only
			s.Policy.Initial, s.Policy.MaxDelay = retry.Immediate, 0
			s.Policy.MaxAttempts = []int{3, 20}[rng.IntN(2)]
		}
		if rng.IntN(4) == 0 {
			s.Policy.MaxElapsed = time.Duration(1+rng.IntN(5000)) * time.Millisecond
		}
		if rng.IntN(2) == 0 {
			s.Budget = &retry.BudgetConfig{Ratio: rng.Float64(), MinPerSecond: float64(rng.IntN(50)), Window: time.Second}
			s.Processes = 1 + rng.IntN(min(s.Clients, 10))
			s.SharedBudget = rng.IntN(2) == 0
		}
		r, err := Run(context.Background(), s)
		if err != nil {
			continue // refused or out of bounds: not this test's concern
		}
		resolved := s
		if err := resolved.resolve(); err != nil {
			t.Fatal(err)
		}
		if r.LoadCut || len(r.Load) == 0 {
			continue
		}
		checked++
		if last := float64(len(r.Load)-1) * float64(s.Slot); last > resolved.lastSlot() {
			t.Fatalf("%+v: a call in the slot starting at %v, past lastSlot %v", s, time.Duration(last), time.Duration(resolved.lastSlot()))
		}
	}
	if checked < 300 {
		t.Fatalf("only %d of 400 scenarios checked", checked)
	}
}
