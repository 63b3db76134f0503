// Package fleetseam is the core's seam for its own packages, kept out of
// package retry's exported surface: what a sync engine (internal/fleet,
// behind retryshare) needs to make retry.Budgets and retry.Throttles in
// many processes decide as one, and the accounting that the library's
// tests and simulator drive without a retry loop. Everything else goes
// through retry.Loop, the one exported seam. Package retry registers its accessors here when it is
// initialised, so any package that imports retry finds them; the core
// never talks to a store.
//
// It imports nothing of the repository (package retry imports it), so the
// accessors are generic in the types they act on: B is *retry.Budget and T
// is *retry.Throttle, and [BudgetOf] and [ThrottleOf] must be called with
// those types.
package fleetseam

import "time"

// Lease is the part of a fleet's retry headroom that a sync engine hands
// one shared Budget through Budget.SetFleet. The zero Lease grants
// nothing.
type Lease struct {
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

// Budget holds what a sync engine does with a Budget (B is *retry.Budget).
// Every function is safe for concurrent use with the Budget's own methods.
type Budget[B any] struct {
	// LocalCounts returns how many first attempts b has counted and how
	// many retries it has granted since it was made: cumulative counters
	// that only grow, so an engine pushes the difference between two
	// readings. It does not read the clock.
	LocalCounts func(b B) (firstAttempts, retries int64)

	// SetFleet makes b decide as one budget shared with other processes,
	// after each successful sync: firstAttempts and retries are the other
	// processes' counts over the window (negative counts as 0), l what
	// the store leased this process of the fleet's headroom. A retry is
	// then granted only when both hold:
	//
	//	reserve + Ratio × (local + fleet first attempts) − (local + fleet retries) ≥ 1
	//	retries granted here since l.Granted + 1 ≤ l.Retries + Ratio × first attempts here since l.FirstAttempts
	//
	// where reserve is MinPerSecond × Window once for the whole fleet;
	// from l.Until on the second rule allows nothing until the next
	// SetFleet or ClearFleet. The store hands out leases so that the
	// retries pushed plus every process's lease never exceed the fleet's
	// headroom (the derivation is in internal/fleet's package doc). It
	// takes b's lock briefly and reads the clock only on a zero Budget's
	// first use.
	SetFleet func(b B, firstAttempts, retries int64, l Lease)

	// ClearFleet makes b a local budget again, exactly as one that was
	// never shared: its own counts, its own full reserve. Clearing a local
	// Budget does nothing.
	ClearFleet func(b B)

	// FleetAsked returns how many retries b was asked for (granted or
	// refused) while shared: a cumulative counter by which an engine sizes
	// the lease it asks the fleet for.
	FleetAsked func(b B) int64

	// Settings returns b's Ratio, MinPerSecond and Window with every
	// default resolved; a Ratio or MinPerSecond that was negative (none)
	// is reported as -1.
	Settings func(b B) (ratio, minPerSecond float64, window time.Duration)

	// RecordAttempt counts a first attempt that is being sent, and
	// AllowRetry withdraws one retry if it fits, as a retry.Loop does:
	// for the tests and the simulator, which drive a Budget without one.
	RecordAttempt func(b B)
	AllowRetry    func(b B) bool
}

// Throttle holds what a sync engine does with a Throttle (T is
// *retry.Throttle). Every function is safe for concurrent use with the
// Throttle's own methods.
type Throttle[T any] struct {
	// LocalCounts returns how many requests (attempts sent, plus attempts
	// rejected locally when CountRejected is set) and accepts t has
	// counted since it was made: cumulative counters that only grow.
	LocalCounts func(t T) (requests, accepts int64)

	// SetFleet sets the other processes' requests and accepts over the
	// window, as last synced (negative counts as 0): the rejection
	// probability is then computed from t's counts plus these, with the
	// same cap. Two atomic stores: Allow never waits for it.
	SetFleet func(t T, requests, accepts int64)

	// ClearFleet makes t a local throttle again (its own counts only).
	ClearFleet func(t T)

	// Window returns t's window with the default resolved.
	Window func(t T) time.Duration

	// Allow asks whether an attempt may be sent, and Record counts the
	// outcome of one it let through, as a retry.Loop does: for the tests
	// and the simulator, which drive a Throttle without one.
	Allow  func(t T) bool
	Record func(t T, accepted bool)
}

var budget, throttle any // set once, by package retry's initialisation

// Register records the accessors. Package retry calls it once, when it is
// initialised; nothing else may.
func Register[B, T any](b Budget[B], t Throttle[T]) { budget, throttle = b, t }

// BudgetOf returns the Budget accessors that package retry registered. B
// must be *retry.Budget, and the caller must import package retry (so
// that it is initialised first).
func BudgetOf[B any]() Budget[B] { return budget.(Budget[B]) }

// ThrottleOf returns the Throttle accessors that package retry registered.
// T must be *retry.Throttle, and the caller must import package retry.
func ThrottleOf[T any]() Throttle[T] { return throttle.(Throttle[T]) }
