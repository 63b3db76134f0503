package retry

import "time"

// This file is the sharing seam: what a sync engine (retryredis,
// retryvalkey) needs to make Budgets and Throttles in many processes
// behave as one. The core never talks to a store; it only exposes its
// cumulative local counts and accepts the other processes' counts.

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

// FleetLease is the part of a fleet's retry headroom that a sync engine
// hands one shared Budget through [Budget.SetFleet]. The zero FleetLease
// grants nothing.
type FleetLease struct {
	// Retries is how many retries the Budget may grant, beyond Ratio ×
	// the first attempts it counts after FirstAttempts, counted from
	// Granted on. Negative counts as 0.
	Retries int64
	// FirstAttempts and Granted are the Budget's LocalCounts as read for
	// the sync that obtained the lease: what the fleet has seen of it.
	FirstAttempts, Granted int64
	// Until is when the lease ends if no SetFleet or ClearFleet replaced
	// it first; a time not after the call grants nothing.
	Until time.Time
}

// Config returns the Budget's configuration with every default resolved
// (the zero Budget reports DefaultBudgetRatio, DefaultBudgetMinPerSecond
// and DefaultBudgetWindow), such that NewBudget(b.Config()) makes an
// equivalent Budget: a Ratio or MinPerSecond that was negative (none) is
// reported as -1. Sync engines use it to name the fleet's keys and to
// size the fleet's headroom from which they lease retries
// ([Budget.SetFleet]).
func (b *Budget) Config() BudgetConfig {
	if !b.set {
		return BudgetConfig{Ratio: DefaultBudgetRatio, MinPerSecond: DefaultBudgetMinPerSecond, Window: DefaultBudgetWindow}
	}
	win := b.w.slot * windowSlots
	c := BudgetConfig{Ratio: b.ratio, MinPerSecond: b.reserve / win.Seconds(), Window: win}
	if c.Ratio == 0 {
		c.Ratio = -1
	}
	if c.MinPerSecond == 0 {
		c.MinPerSecond = -1
	}
	return c
}

// LocalCounts returns how many first attempts this Budget has counted and
// how many retries it has granted since it was made: cumulative counters
// that only grow, so a sync engine pushes the difference between two
// readings. Safe for concurrent use; it does not read the clock.
func (b *Budget) LocalCounts() (firstAttempts, retries int64) {
	return b.w.a.Load(), b.w.b.Load()
}

// SetFleet makes b decide as one budget shared with other processes, and
// is called by a sync engine after each successful sync. firstAttempts and
// retries are the other processes' counts over the window, as just read
// from the store (negative values count as 0); lease is what the store
// handed this process of the fleet's headroom.
//
// From then on a retry is granted only when both hold:
//
//	reserve + Ratio × (local + fleet first attempts) − (local + fleet retries) ≥ 1
//	retries granted here since lease.Granted + 1 ≤ lease.Retries + Ratio × first attempts here since lease.FirstAttempts
//
// where reserve is MinPerSecond × Window once for the whole fleet; from
// lease.Until on the second rule allows nothing, so no retry is granted
// until the next SetFleet or ClearFleet. The store hands out leases so
// that the retries pushed plus every process's lease never exceed the
// fleet's headroom: no process can spend what another was promised, and
// the fleet's retries stay within one Budget's bound whatever the number
// of processes (the derivation is in internal/fleet's package doc).
//
// SetFleet takes b's lock briefly and never blocks on anything else; it
// reads the clock only on a zero Budget's first use.
func (b *Budget) SetFleet(firstAttempts, retries int64, lease FleetLease) {
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

// FleetAsked returns how many retries this Budget was asked for (granted
// or refused) while shared: a cumulative counter that only grows, by
// which a sync engine sizes the lease it asks the fleet for. Safe for
// concurrent use; it does not read the clock.
func (b *Budget) FleetAsked() int64 { return b.asked.Load() }

// ClearFleet makes b a local budget again, exactly as one that was never
// shared: its own counts, its own full reserve. A sync engine calls it
// when the store stops answering. Clearing a local Budget does nothing.
func (b *Budget) ClearFleet() {
	b.w.mu.Lock()
	b.fleet = fleetMarks{}
	b.w.fa.Store(0)
	b.w.fb.Store(0)
	b.w.mu.Unlock()
}

// Config returns the Throttle's configuration with every default resolved
// (the zero Throttle reports DefaultThrottleK, DefaultThrottleWindow and
// DefaultThrottleMaxProbability; Accepted and Observer are returned as
// given, nil meaning the default rule and no events).
func (t *Throttle) Config() ThrottleConfig {
	if !t.set {
		return ThrottleConfig{K: DefaultThrottleK, Window: DefaultThrottleWindow, MaxProbability: DefaultThrottleMaxProbability}
	}
	return ThrottleConfig{K: t.k, Window: t.w.slot * windowSlots, MaxProbability: t.maxP,
		CountRejected: t.countRej, Accepted: t.accepted, Observer: t.observer}
}

// LocalCounts returns how many requests (attempts sent, plus attempts
// rejected locally when CountRejected is set) and accepts this Throttle
// has counted since it was made: cumulative counters that only grow.
// Safe for concurrent use.
func (t *Throttle) LocalCounts() (requests, accepts int64) {
	return t.w.a.Load(), t.w.b.Load()
}

// SetFleet sets the other processes' requests and accepts over the
// window, as last synced; from then on the rejection probability is
// computed from this process's counts plus these (negative values count
// as 0), with the same cap, so that a process that joins a fleet during
// an outage still sends its share of probes. A sync engine calls it after
// each successful sync. It is two atomic stores: Allow never waits for it.
func (t *Throttle) SetFleet(requests, accepts int64) {
	t.w.fa.Store(max(requests, 0))
	t.w.fb.Store(max(accepts, 0))
}

// ClearFleet makes t a local throttle again (its own counts only).
func (t *Throttle) ClearFleet() { t.SetFleet(0, 0) }
