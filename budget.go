package retry

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry/internal/defaults"
)

// BudgetConfig configures [NewBudget]. The zero BudgetConfig means all the
// defaults.
type BudgetConfig struct {
	// Ratio is the number of retries each first attempt earns: over any
	// Window, retries are allowed while
	//	retries ≤ Ratio × first attempts + MinPerSecond × Window.
	// Zero means 0.1, the Google SRE book's per-client retry budget (a failing
	// backend then sees at most 1.1× its normal load); a negative value means that
	// requests earn nothing and only the floor is left. NaN and ±Inf are
	// invalid.
	Ratio float64

	// MinPerSecond is the floor: retries per second, averaged over the
	// window, allowed whatever the traffic, so that a client that sends
	// few requests can still retry. It is granted as a reserve of
	// MinPerSecond × Window retries per window, so it may be spent in a
	// burst. Zero means 1 (the SRE book's server-wide example is 60 a
	// minute per process); a negative value means no floor. NaN and ±Inf are invalid, and so is a value whose
	// reserve, MinPerSecond × Window, is too large for a float64.
	MinPerSecond float64

	// Window is how long first attempts and retries are remembered. It is
	// kept in 10 slots of Window/10, so an event is forgotten between
	// 0.9 × Window and Window after it happened. Zero means
	// 10 s (Finagle's RetryBudget TTL); values below 1 ms are invalid.
	Window time.Duration
}

// Budget is a retry budget: it lets retries through while they stay under
// a ratio of the first attempts made recently, plus a small floor, and
// refuses them otherwise. [Do] stops with [ReasonBudget] (and an error
// matching [ErrBudgetRefused] that wraps the last error) when the budget
// refuses a retry. First attempts are never refused.
//
// One Budget is meant to be shared, through Policy.Budget, by every
// Policy, goroutine and transport that calls the same backend; it is safe
// for concurrent use. First attempts only add to an atomic counter (no
// lock, no allocation); the clock is read once per 64 first attempts and on
// each retry decision, which takes a mutex. Between clock readings, first
// attempts are dated to the last reading, so they may be forgotten up to
// that much early: the approximation only ever refuses more, never allows
// more. A retry refused by a Throttle after the budget granted it still
// counts against the budget.
//
// Over any span of T, the retries granted are at most
// Ratio × (first attempts) + MinPerSecond × (T + 2 × Window).
//
// Processes can share one Budget (one Ratio, one floor for all of them)
// through a store: the retryshare package keeps
// it in step from a background goroutine (retryshare.Budget); the
// decision stays local, each process grants from a lease of the fleet's
// headroom handed out by the store, and the bound above then holds for the
// whole fleet, with first attempts counted from one window plus a lease's
// life (300 ms by default) before the span.
//
// Get one with [NewBudget] or a preset ([GRPCBudget], [FinagleBudget],
// [AWSBudget]). The zero Budget is ready to use and has the defaults:
// 10% of first attempts plus 1 retry per second, over 10 s. A Budget must
// not be copied after first use.
type Budget struct {
	w       window  // a: first attempts sent; b: retries granted
	ratio   float64 // resolved; read only under w.mu
	reserve float64 // MinPerSecond × Window, resolved; read only under w.mu
	set     bool    // false for the zero Budget: use the defaults

	fleet fleetMarks   // guarded by w.mu
	asked atomic.Int64 // retry decisions while shared; see fleetAsked
}

// NewBudget returns a Budget configured by c, or an error naming the
// invalid field.
func NewBudget(c BudgetConfig) (*Budget, error) {
	ratio, floor, win := c.Ratio, c.MinPerSecond, c.Window
	switch {
	case math.IsNaN(ratio) || math.IsInf(ratio, 0):
		return nil, errors.New("retry: BudgetConfig.Ratio must be a finite number")
	case math.IsNaN(floor) || math.IsInf(floor, 0):
		return nil, errors.New("retry: BudgetConfig.MinPerSecond must be a finite number")
	case win < 0 || (win > 0 && win < time.Millisecond):
		return nil, errors.New("retry: BudgetConfig.Window must be zero (10 s) or at least 1ms, got " + win.String())
	}
	if ratio == 0 {
		ratio = defaults.BudgetRatio
	}
	if floor == 0 {
		floor = defaults.BudgetMinPerSecond
	}
	if win == 0 {
		win = defaults.BudgetWindow
	}
	reserve := max(floor, 0) * win.Seconds()
	// config reports reserve over the window the slots make (win rounded
	// down to a multiple of windowSlots), which may be a little shorter.
	if math.IsInf(reserve, 0) || math.IsInf(reserve/(win/windowSlots*windowSlots).Seconds(), 0) {
		// config would report an infinite MinPerSecond, which NewBudget
		// refuses, and a sync engine an infinite reserve to lease from.
		return nil, errors.New("retry: BudgetConfig.MinPerSecond × Window must be a finite number")
	}
	b := &Budget{ratio: max(ratio, 0), reserve: reserve, set: true}
	b.w.slot = win / windowSlots
	b.w.start = time.Now()
	return b, nil
}

// GRPCBudget returns a new Budget modelled on gRPC retry throttling (gRFC
// A6) with the example figures maxTokens 10, tokenRatio 0.1. gRPC starts
// with maxTokens tokens, takes 1 per failed attempt, adds tokenRatio per
// success and allows retries while more than maxTokens/2 remain. It maps
// to BudgetConfig{Ratio: tokenRatio, MinPerSecond: maxTokens/2 / 10,
// Window: 10 s}: retries are bounded by tokenRatio per request, as gRPC's
// steady state bounds failures by tokenRatio per success, and the
// maxTokens/2 headroom becomes the reserve of one window. Differences:
// gRPC counts failures against successes with no time window, and its
// headroom comes back only through successes, while here it comes back
// as retries age out of the window. For other gRPC figures, build the
// mapped BudgetConfig with [NewBudget].
func GRPCBudget() *Budget {
	return mustBudget(BudgetConfig{Ratio: 0.1, MinPerSecond: 10.0 / 2 / 10, Window: 10 * time.Second})
}

// FinagleBudget returns a new Budget with the figures of Finagle's (and
// Linkerd's) default RetryBudget: retries up to 20% of requests plus 10
// retries per second, with deposits expiring after 10 s. The mapping is
// direct: percentCanRetry 0.2 is Ratio, minRetriesPerSec 10 is
// MinPerSecond, ttl 10 s is Window (Finagle also keeps a reserve of
// minRetriesPerSec × ttl).
func FinagleBudget() *Budget {
	return mustBudget(BudgetConfig{Ratio: 0.2, MinPerSecond: 10, Window: 10 * time.Second})
}

// AWSBudget returns a new Budget modelled on the AWS SDKs' retry quota
// in standard mode: a bucket of 500 tokens, 14 tokens per transient-error
// retry (5 per throttling retry, which one Budget does not distinguish;
// 5 per retry before November 2026) and 1 token back per success at the
// first attempt. In retries that is a capacity of 500/14 ≈ 35.7 retries and
// 1/14 of a retry earned per request: BudgetConfig{Ratio: 1/14,
// MinPerSecond: 500/14 / 60, Window: 60 s}. Difference: the SDKs' quota
// has no time window and refills only through successes, while here unused
// capacity comes back as retries age out of the 60 s window. Pair it with
// [AWSStandardPolicy].
func AWSBudget() *Budget {
	return mustBudget(BudgetConfig{Ratio: 1.0 / 14, MinPerSecond: 500.0 / 14 / 60, Window: 60 * time.Second})
}

func mustBudget(c BudgetConfig) *Budget {
	b, err := NewBudget(c)
	if err != nil {
		panic(err) // unreachable: the presets are valid
	}
	return b
}

// record counts an attempt that is being sent. Only first attempts earn
// budget; retries were counted when allowRetry granted them.
func (b *Budget) record(isRetry bool) {
	if isRetry {
		return
	}
	if b.w.a.Add(1)&clockEvery == 0 {
		b.w.tick(defaults.BudgetWindow)
	}
}

// allowRetry reports whether one more retry fits in the budget and, if so,
// withdraws it.
func (b *Budget) allowRetry() bool {
	ratio, reserve := b.ratio, b.reserve
	if !b.set {
		ratio, reserve = defaults.BudgetRatio, defaults.BudgetMinPerSecond*defaults.BudgetWindow.Seconds()
	}
	b.w.mu.Lock()
	now := b.w.advanceLocked(defaults.BudgetWindow)
	first, retries := b.w.counts()
	if b.fleet.shared {
		b.asked.Add(1)
		first += b.w.fa.Load()
		retries += b.w.fb.Load()
	}
	ok := reserve+ratio*float64(first)-float64(retries) >= 1
	if ok && b.fleet.shared {
		ok = b.fleet.leaseAllows(ratio, b.w.a.Load(), b.w.b.Load(), now)
	}
	if ok {
		b.w.b.Add(1)
	}
	b.w.mu.Unlock()
	return ok
}

// windowSlots is the number of slots a window is kept in.
const windowSlots = 10

// clockEvery+1 is how many events pass between two clock readings on the
// hot paths of Budget and Throttle; a power of two minus one, used as a mask.
const clockEvery = 63

// window keeps two cumulative event counters (a and b) and, for each of the
// last windowSlots time slots, their values when the slot was first
// observed, so that the counts over the window are the cumulative values
// minus those of the oldest live slot. Counting is one atomic add; the
// slots advance only when someone reads the clock (advanceLocked), so
// events are dated no later than they happened.
type window struct {
	a, b atomic.Int64 // cumulative counts
	_    [48]byte     // keep the hot counters off the line below

	baseA, baseB atomic.Int64 // a and b at the start of the window

	// fa and fb are the other processes' counts over the window, as last
	// synced through setFleet; zero while the Budget or Throttle is local.
	fa, fb atomic.Int64

	mu    sync.Mutex
	start time.Time     // guarded by mu; set at the first advance
	slot  time.Duration // set before sharing; zero means the owner's default
	head  int64         // guarded by mu: the latest slot observed
	snapA [windowSlots]int64
	snapB [windowSlots]int64
}

// tick advances the window unless another goroutine holds the lock.
func (w *window) tick(def time.Duration) {
	if w.mu.TryLock() {
		w.advanceLocked(def)
		w.mu.Unlock()
	}
}

// advanceLocked reads the clock and moves the window to the current slot;
// def is the window length to use when w.slot is zero (a zero Budget or
// Throttle). It returns the time since w.start. w.mu must be held.
func (w *window) advanceLocked(def time.Duration) time.Duration {
	if w.start.IsZero() {
		w.start = time.Now()
		return 0
	}
	slot := w.slot
	if slot <= 0 {
		slot = def / windowSlots
	}
	now := time.Since(w.start)
	k := int64(now / slot)
	if k <= w.head {
		return now
	}
	a, b := w.a.Load(), w.b.Load()
	for j := max(w.head+1, k-windowSlots+1); j <= k; j++ {
		w.snapA[j%windowSlots] = a
		w.snapB[j%windowSlots] = b
	}
	w.head = k
	oldest := (k + 1) % windowSlots // slot k-windowSlots+1; never written yet means 0
	w.baseA.Store(w.snapA[oldest])
	w.baseB.Store(w.snapB[oldest])
	return now
}

// counts returns a and b over the window. Lock-free: under concurrent
// updates the pair may be slightly out of step, never negative.
func (w *window) counts() (a, b int64) {
	a = w.a.Load() - w.baseA.Load()
	b = w.b.Load() - w.baseB.Load()
	return max(a, 0), max(b, 0)
}

// config returns the Budget's configuration with every default resolved
// (the zero Budget reports 0.1, 1 and 10 s), such that NewBudget(b.config())
// makes an equivalent Budget: a Ratio or MinPerSecond that was negative
// (none) is reported as -1. The sharing engine reads it through
// internal/fleetseam to size the fleet's headroom.
func (b *Budget) config() BudgetConfig {
	if !b.set {
		return BudgetConfig{Ratio: defaults.BudgetRatio, MinPerSecond: defaults.BudgetMinPerSecond, Window: defaults.BudgetWindow}
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
