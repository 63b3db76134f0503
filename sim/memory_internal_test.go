package sim

import (
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
