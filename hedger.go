package retry

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry/internal/defaults"

	"github.com/retrykit/retry/internal/quantile"
)

// maxHedgeSamples bounds HedgeConfig.Samples: a ring of 8 MiB, and as
// much again to sort.
const maxHedgeSamples = 1 << 20

// HedgeConfig configures [NewHedger]. The zero HedgeConfig means an
// adaptive Hedger with all the defaults.
type HedgeConfig struct {
	// FixedDelay, when positive, is a fixed hedge delay: the next copy is
	// sent once the last one sent has been outstanding this long. Zero, no
	// fixed delay, means adaptive: the delay is the Quantile of recent
	// latencies. Negative values are invalid.
	FixedDelay time.Duration

	// Quantile is, for an adaptive Hedger, the quantile of recent
	// latencies of successful attempts used as the delay (0.9 hedges about
	// 10 % of calls when latencies are independent). Zero means
	// 0.95, the point "The Tail at Scale" recommends; values outside (0, 1) are invalid. It
	// must be zero with a FixedDelay.
	Quantile float64

	// MinDelay is the floor of an adaptive delay. Zero means
	// 1 ms (as Finagle's BackupRequestFilter); negative values are invalid.
	MinDelay time.Duration

	// WarmUp is how many latencies an adaptive Hedger records before it
	// sends any hedge: until then calls run one copy at a time. Zero means
	// 100; it must not exceed Samples.
	WarmUp int

	// Samples is how many recent latencies an adaptive Hedger keeps, its
	// only memory: a ring of Samples durations. The delay is recomputed
	// from them every Samples/16 new latencies. Zero means
	// 1000 (8 KB); negative values and values above
	// 1,048,576 (a ring of 8 MiB) are invalid.
	Samples int

	// MaxCopies is the most copies of one call in flight at once, the
	// first included; the policy's MaxAttempts still caps the copies sent
	// in all. Zero means 5, gRFC A6's default cap on a hedged call's
	// attempts; 1 sends one copy at a
	// time (no hedging, failures still retried); negative values are
	// invalid.
	MaxCopies int
}

// Hedger says when a hedged call ([Hedge], [HedgeValue]) sends another copy
// of an operation that is still in flight: after a fixed delay, or after
// an adaptive one, the Quantile of the latencies of recent successful
// attempts (with a floor, a warm-up and a bounded memory), as Finagle's
// BackupRequestFilter and failsafe-go do; and how many copies may be in
// flight at once.
//
// An adaptive Hedger learns from the calls it serves, so share one per
// kind of call whose latencies are alike (one backend, one method), as
// you would share a [Budget]. It is safe for concurrent use: each success
// takes a mutex for a few nanoseconds to store its latency, and every
// Samples/16 of them one of them sorts a copy of the samples. A fixed
// Hedger holds no state and reads no clock.
//
// Get one with [NewHedger]. The zero Hedger is ready to use: adaptive at
// the 95th percentile, 1 ms floor, 100 latencies of warm-up, the last 1000
// kept, 5 copies in flight. A Hedger must not be copied after first use.
type Hedger struct {
	delay     time.Duration // fixed delay; zero: adaptive
	quantile  float64
	floor     time.Duration
	warmUp    int
	size      int
	maxCopies int
	set       bool // false for the zero Hedger: use the defaults

	cur atomic.Int64 // the adaptive delay in ns; zero until warmed up

	mu sync.Mutex
	w  quantile.Window // guarded by mu; its ring is allocated at the first sample

	pool sync.Pool // *hedgeCall[T] of ended calls, reused by the next
}

// NewHedger returns a Hedger configured by c, or an error naming the
// invalid field.
func NewHedger(c HedgeConfig) (*Hedger, error) {
	switch {
	case c.FixedDelay < 0:
		return nil, fmt.Errorf("retry: HedgeConfig.FixedDelay %v is negative", c.FixedDelay)
	case c.FixedDelay > 0 && c.Quantile != 0:
		return nil, errors.New("retry: HedgeConfig.Quantile must be zero with a FixedDelay")
	case c.Quantile != 0 && !(c.Quantile > 0 && c.Quantile < 1):
		return nil, fmt.Errorf("retry: HedgeConfig.Quantile %v is not in (0, 1)", c.Quantile)
	case c.MinDelay < 0:
		return nil, fmt.Errorf("retry: HedgeConfig.MinDelay %v is negative", c.MinDelay)
	case c.WarmUp < 0:
		return nil, fmt.Errorf("retry: HedgeConfig.WarmUp %d is negative", c.WarmUp)
	case c.Samples < 0:
		return nil, fmt.Errorf("retry: HedgeConfig.Samples %d is negative", c.Samples)
	case c.Samples > maxHedgeSamples:
		return nil, fmt.Errorf("retry: HedgeConfig.Samples %d exceeds %d", c.Samples, maxHedgeSamples)
	case c.MaxCopies < 0:
		return nil, fmt.Errorf("retry: HedgeConfig.MaxCopies %d is negative", c.MaxCopies)
	}
	h := &Hedger{delay: c.FixedDelay, quantile: c.Quantile, floor: c.MinDelay, warmUp: c.WarmUp,
		size: c.Samples, maxCopies: c.MaxCopies, set: true}
	if h.quantile == 0 {
		h.quantile = defaults.HedgeQuantile
	}
	if h.floor == 0 {
		h.floor = defaults.HedgeMinDelay
	}
	if h.warmUp == 0 {
		h.warmUp = defaults.HedgeWarmUp
	}
	if h.size == 0 {
		h.size = defaults.HedgeSamples
	}
	if h.maxCopies == 0 {
		h.maxCopies = defaults.HedgeMaxCopies
	}
	if h.warmUp > h.size {
		return nil, fmt.Errorf("retry: HedgeConfig.WarmUp %d exceeds Samples %d", h.warmUp, h.size)
	}
	return h, nil
}

// params returns the Hedger's settings, the defaults for the zero Hedger.
func (h *Hedger) params() (quantile float64, floor time.Duration, warmUp, size int) {
	if !h.set {
		return defaults.HedgeQuantile, defaults.HedgeMinDelay, defaults.HedgeWarmUp, defaults.HedgeSamples
	}
	return h.quantile, h.floor, h.warmUp, h.size
}

func (h *Hedger) copies() int {
	if !h.set {
		return defaults.HedgeMaxCopies
	}
	return h.maxCopies
}

// adaptive reports whether h learns its delay from latencies.
func (h *Hedger) adaptive() bool { return h.delay == 0 }

// Delay returns the delay after which a copy in flight gets a hedge, and
// false while an adaptive Hedger is still warming up (no hedges yet).
func (h *Hedger) Delay() (time.Duration, bool) {
	if !h.adaptive() {
		return h.delay, true
	}
	d := time.Duration(h.cur.Load())
	return d, d > 0
}

// observeLoser records the time d that a copy cancelled in flight had
// been outstanding, a lower bound of its latency, when it is at least the
// current delay: it then says that the latency was above the quantile,
// which keeps the quantile from drifting down as hedges cut the slow
// attempts short. A shorter time (a hedge that lost soon after it was
// sent) says nothing and would drag the quantile down: it is dropped, and
// so is every loser's during the warm-up.
func (h *Hedger) observeLoser(d time.Duration) {
	if cur, ok := h.Delay(); ok && d >= cur {
		h.observe(d)
	}
}

// observe records the latency d of an attempt that succeeded, or the
// lower bound of one that observeLoser keeps.
func (h *Hedger) observe(d time.Duration) {
	h.mu.Lock()
	if h.w.Size == 0 {
		q, floor, warmUp, size := h.params()
		h.w = quantile.Window{Size: size, WarmUp: warmUp, Quantile: q, Floor: int64(floor)}
	}
	h.cur.Store(h.w.Add(int64(d)))
	h.mu.Unlock()
}
