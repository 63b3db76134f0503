package retry

// This file is the sharing seam: what a sync engine (retryredis,
// retryvalkey) needs to make Budgets and Throttles in many processes
// behave as one. The core never talks to a store; it only exposes its
// cumulative local counts and accepts the other processes' counts.

// fleetMarks is the state a shared Budget keeps for bounding the slack
// between syncs. Guarded by the Budget's w.mu.
type fleetMarks struct {
	shared bool
	// allowance is the floor-funded retries this process may grant
	// between mark and now, beyond Ratio × its own first attempts since
	// mark.
	allowance float64
	// markA/markB are the cumulative local counts at the next-to-last
	// SetFleet; lastA/lastB at the last one.
	markA, markB int64
	lastA, lastB int64
}

// slackAllows reports whether one more retry keeps the retries granted
// since the next-to-last sync within the allowance plus what the first
// attempts since then earned. a and b are the cumulative local counts.
func (f *fleetMarks) slackAllows(ratio float64, a, b int64) bool {
	return float64(b-f.markB)+1 <= f.allowance+ratio*float64(a-f.markA)
}

// Config returns the Budget's configuration with every default resolved
// (the zero Budget reports DefaultBudgetRatio, DefaultBudgetMinPerSecond
// and DefaultBudgetWindow), such that NewBudget(b.Config()) makes an
// equivalent Budget: a Ratio or MinPerSecond that was negative (none) is
// reported as -1. Sync engines use it to name the fleet's keys and size
// the allowance of [Budget.SetFleet].
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
// from the store (negative values count as 0).
//
// From then on a retry is granted only when both hold:
//
//	reserve + Ratio × (local + fleet first attempts) − (local + fleet retries) ≥ 1
//	retries granted here since the next-to-last SetFleet + 1 ≤ allowance + Ratio × first attempts here since then
//
// where reserve is MinPerSecond × Window once for the whole fleet. The
// second rule bounds what a process can grant on stale fleet counts: the
// retries it grants beyond what its own new first attempts earned, and
// that the other processes may not have seen yet, are at most allowance.
// A sync engine passes one sync interval's share of the floor,
// max(1, MinPerSecond × interval). A negative or NaN allowance counts as 0.
//
// SetFleet takes b's lock briefly and never blocks on anything else.
func (b *Budget) SetFleet(firstAttempts, retries int64, allowance float64) {
	if !(allowance > 0) {
		allowance = 0
	}
	b.w.mu.Lock()
	b.w.fa.Store(max(firstAttempts, 0))
	b.w.fb.Store(max(retries, 0))
	a, r := b.w.a.Load(), b.w.b.Load()
	f := &b.fleet
	if !f.shared {
		f.lastA, f.lastB = a, r
	}
	f.markA, f.markB = f.lastA, f.lastB
	f.lastA, f.lastB = a, r
	f.allowance = allowance
	f.shared = true
	b.w.mu.Unlock()
}

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
// (the zero Throttle reports DefaultThrottleK and DefaultThrottleWindow;
// Accepted is returned as given, nil meaning the default rule).
func (t *Throttle) Config() ThrottleConfig {
	if !t.set {
		return ThrottleConfig{K: DefaultThrottleK, Window: DefaultThrottleWindow}
	}
	return ThrottleConfig{K: t.k, Window: t.w.slot * windowSlots, Accepted: t.accepted}
}

// LocalCounts returns how many requests (attempts sent plus attempts
// rejected locally) and accepts this Throttle has counted since it was
// made: cumulative counters that only grow. Safe for concurrent use.
func (t *Throttle) LocalCounts() (requests, accepts int64) {
	return t.w.a.Load(), t.w.b.Load()
}

// SetFleet sets the other processes' requests and accepts over the
// window, as last synced; from then on the rejection probability is
// computed from this process's counts plus these (negative values count
// as 0). A sync engine calls it after each successful sync. It is two
// atomic stores: Allow never waits for it.
func (t *Throttle) SetFleet(requests, accepts int64) {
	t.w.fa.Store(max(requests, 0))
	t.w.fb.Store(max(accepts, 0))
}

// ClearFleet makes t a local throttle again (its own counts only).
func (t *Throttle) ClearFleet() { t.SetFleet(0, 0) }
