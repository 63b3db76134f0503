package retry

import (
	"time"

	"github.com/retrykit/retry/internal/fleetseam"
)

// This file is the sharing seam: what a sync engine (internal/fleet,
// behind retryshare) needs to make Budgets and Throttles in many processes
// behave as one, and the bare accounting that tests and the simulator
// drive. It is not exported: init registers these methods with
// internal/fleetseam, where the engine finds them. The core never talks to
// a store; it only gives its cumulative local counts and takes the other
// processes' counts.

func init() {
	fleetseam.Register(fleetseam.Budget[*Budget]{
		LocalCounts: (*Budget).localCounts,
		SetFleet:    (*Budget).setFleet,
		ClearFleet:  (*Budget).clearFleet,
		FleetAsked:  (*Budget).fleetAsked,
		Settings: func(b *Budget) (float64, float64, time.Duration) {
			c := b.config()
			return c.Ratio, c.MinPerSecond, c.Window
		},
		RecordAttempt: func(b *Budget) { b.record(false) },
		AllowRetry:    (*Budget).allowRetry,
	}, fleetseam.Throttle[*Throttle]{
		LocalCounts: (*Throttle).localCounts,
		SetFleet:    (*Throttle).setFleet,
		ClearFleet:  (*Throttle).clearFleet,
		Window:      func(t *Throttle) time.Duration { return t.config().Window },
		Allow:       (*Throttle).allow,
		Record:      (*Throttle).count,
	})
}

// fleetMarks is the state of a shared Budget's lease. Guarded by the
// Budget's w.mu.
type fleetMarks struct {
	shared bool
	// lease is the retries this process may grant beyond Ratio × its
	// first attempts since markA, counted from markB, until until (time
	// since the window's start).
	lease        float64
	markA, markB int64
	until        time.Duration
}

// leaseAllows reports whether one more retry fits in the lease: a and b
// are the cumulative local counts, now the time since the window's start.
func (f *fleetMarks) leaseAllows(ratio float64, a, b int64, now time.Duration) bool {
	return now < f.until && float64(b-f.markB)+1 <= f.lease+ratio*float64(a-f.markA)
}

// localCounts is fleetseam.Budget.LocalCounts.
func (b *Budget) localCounts() (firstAttempts, retries int64) {
	return b.w.a.Load(), b.w.b.Load()
}

// setFleet is fleetseam.Budget.SetFleet.
func (b *Budget) setFleet(firstAttempts, retries int64, lease fleetseam.Lease) {
	b.w.mu.Lock()
	if b.w.start.IsZero() {
		b.w.start = time.Now()
	}
	b.w.fa.Store(max(firstAttempts, 0))
	b.w.fb.Store(max(retries, 0))
	b.fleet = fleetMarks{
		shared: true,
		lease:  float64(max(lease.Retries, 0)),
		markA:  lease.FirstAttempts,
		markB:  lease.Granted,
		until:  lease.Until.Sub(b.w.start),
	}
	b.w.mu.Unlock()
}

// fleetAsked is fleetseam.Budget.FleetAsked.
func (b *Budget) fleetAsked() int64 { return b.asked.Load() }

// clearFleet is fleetseam.Budget.ClearFleet.
func (b *Budget) clearFleet() {
	b.w.mu.Lock()
	b.fleet = fleetMarks{}
	b.w.fa.Store(0)
	b.w.fb.Store(0)
	b.w.mu.Unlock()
}

// localCounts is fleetseam.Throttle.LocalCounts.
func (t *Throttle) localCounts() (requests, accepts int64) {
	return t.w.a.Load(), t.w.b.Load()
}

// setFleet is fleetseam.Throttle.SetFleet.
func (t *Throttle) setFleet(requests, accepts int64) {
	t.w.fa.Store(max(requests, 0))
	t.w.fb.Store(max(accepts, 0))
}

// clearFleet is fleetseam.Throttle.ClearFleet.
func (t *Throttle) clearFleet() { t.setFleet(0, 0) }
