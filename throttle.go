package retry

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry/internal/defaults"
)

// ThrottleConfig configures [NewThrottle]. The zero ThrottleConfig means
// all the defaults.
type ThrottleConfig struct {
	// K is the multiplier of accepts in the rejection probability
	// max(0, (requests − K × accepts) / (requests + 1)): the Throttle
	// rejects nothing while at least 1/K of the requests in the window
	// were accepted. Lower values throttle harder (the SRE book cites 1.1).
	// Zero means 2, the book's typical value; values below 1, which would throttle
	// a healthy backend, and NaN or +Inf are invalid.
	K float64

	// Window is how long requests and accepts are remembered, kept in 10
	// slots of Window/10 (an event is forgotten between 0.9 × Window and
	// Window after it happened). Zero means 10 s (go-zero's breaker
	// window; the book's 2 minutes kept clients out for minutes after an
	// outage); values below 1 ms are invalid. It sets both how long a backend must
	// fail before rejection starts (about Window/2 of a total outage with
	// K 2) and how long the failures of an outage weigh after it: with the
	// default rule, at least 95 % of the demand is sent again within
	// about 0.7 × Window of the backend's recovery.
	Window time.Duration

	// MaxProbability caps the rejection probability, so that some attempts
	// still reach a backend that refuses everything and show when it is
	// back. Zero means 0.9, as failsafe-go's adaptive throttler: at least
	// 10 % of the demand is still sent; 1 means no cap;
	// values outside [0, 1] and NaN are invalid.
	MaxProbability float64

	// CountRejected counts each attempt the Throttle rejected as a request,
	// as the SRE book's rule does. Under a partial overload the client
	// then sends about K × what the backend accepts, instead of about
	// √(demand × K × accepted) (see docs/storms.md), but after a total
	// outage the share let through grows only about K-fold per window, and
	// with MaxProbability 1 (the rule as the book writes it) a long outage
	// leaves almost nothing sent for minutes. False (the default) counts
	// only the attempts sent.
	CountRejected bool

	// Accepted says whether an attempt that failed with err was accepted by
	// the backend. It is never called for a nil error (always accepted) or
	// for an error that wraps [ErrThrottled] (an attempt rejected locally by
	// a nested loop or transport, which is not counted at all). It must be
	// safe for concurrent use. Nil means the default rule: an error counts
	// as a rejection when it, or an error it wraps, has a method
	// Overloaded() bool that returns true (retryhttp's errors for 429 and
	// 503 do) or is context.DeadlineExceeded (the backend did not answer
	// in time), and so does any error of an attempt that ran out of
	// Policy.AttemptTimeout in [Do], whatever the operation returned; any
	// other error counts as accepted, because it shows, as
	// far as generic code can tell, that the backend took the request and
	// answered it. Set Accepted to count, for example, connection errors as
	// rejections.
	Accepted func(err error) bool

	// Observer, when set, is told when the Throttle starts rejecting
	// ([EventThrottleStarted]) and when it stops ([EventThrottleStopped]),
	// including by [Throttle.Override], with a background context, on the
	// goroutine whose decision or call saw the change. It must be safe for
	// concurrent use and return quickly. Nil means no events.
	Observer Observer
}

// Throttle is adaptive client-side throttling after the Google SRE book
// ("Handling Overload"), made to recover by itself: it remembers, over a
// window, the attempts sent (requests) and how many the backend accepted,
// and rejects each new attempt locally with probability
//
//	min(MaxProbability, max(0, (requests − K × accepts) / (requests + 1)))
//
// An attempt it rejects in [Do] fails with [ErrThrottled] without calling
// the operation and is retried like any failure. Attempts in flight are
// counted when their outcome is known, so a new Throttle does not reject a
// burst of first requests. Unlike the book's rule, attempts it rejected
// are not counted as requests (unless CountRejected) and the probability
// is capped (0.9 by default): the book's rule, after an outage, rejects
// nearly everything, so nothing is accepted, so it keeps rejecting. With
// the defaults, a backend that refuses everything still gets 10 % of the
// demand, and once it accepts again at least 95 % of the demand is sent
// within 10 s, whatever the outage's length; under a partial overload the
// client sends about √(demand × K × accepted), at least K × accepted. The
// rule, its bounds and the measurements are in docs/storms.md.
//
// Its state is visible and can be overridden, as a circuit breaker's:
// [Throttle.Probability] is the current rejection probability,
// ThrottleConfig.Observer is told when rejection starts and stops, and
// [Throttle.Override] rejects every attempt, or none, until released.
//
// A Throttle is meant to be shared, through Policy.Throttle or a transport,
// by every caller of the same backend; it is safe for concurrent use.
// While it rejects nothing, deciding takes a few atomic loads, and
// counting an outcome two atomic adds, with no lock and no allocation. The
// clock is read once per 64 outcomes, and before each decision while the
// rejection probability is above zero; between readings events are dated
// to the last reading, so the window may end up to 64 events late while
// the backend is healthy.
//
// Processes can share one Throttle through a store
// (retryshare.Throttle): the rejection
// probability is then computed from the requests and accepts of the whole
// fleet, as last synced.
//
// Get one with [NewThrottle]. The zero Throttle is ready to use with the
// defaults (K 2, window 10 s, cap 0.9, rejections not counted, the
// default Accepted rule, no Observer). A Throttle must not be copied after
// first use.
type Throttle struct {
	w        window        // a: requests; b: accepts
	state    atomic.Uint32 // throttleRejecting | one of the override bits
	k        float64
	maxP     float64
	countRej bool
	accepted func(error) bool
	observer Observer
	set      bool // false for the zero Throttle: use the defaults
}

// Bits of Throttle.state. Zero is the common state (not rejecting, no
// override), the only one in which the fast path decides alone.
const (
	throttleRejecting   = 1 << iota // the last decision saw a probability above 0
	throttleForceReject             // Override(ThrottleRejectAll)
	throttleForceAllow              // Override(ThrottleAllowAll)
)

// NewThrottle returns a Throttle configured by c, or an error naming the
// invalid field.
func NewThrottle(c ThrottleConfig) (*Throttle, error) {
	k, win, maxP := c.K, c.Window, c.MaxProbability
	switch {
	case k != 0 && !(k >= 1 && !math.IsInf(k, 1)):
		return nil, errors.New("retry: ThrottleConfig.K must be zero (2) or a finite number of at least 1")
	case win < 0 || (win > 0 && win < time.Millisecond):
		return nil, errors.New("retry: ThrottleConfig.Window must be zero (10s) or at least 1ms, got " + win.String())
	case !(maxP >= 0 && maxP <= 1):
		return nil, errors.New("retry: ThrottleConfig.MaxProbability must be zero (0.9) or in (0, 1]")
	}
	if k == 0 {
		k = defaults.ThrottleK
	}
	if win == 0 {
		win = defaults.ThrottleWindow
	}
	if maxP == 0 {
		maxP = defaults.ThrottleMaxProbability
	}
	t := &Throttle{k: k, maxP: maxP, countRej: c.CountRejected, accepted: c.Accepted, observer: c.Observer, set: true}
	t.w.slot = win / windowSlots
	t.w.start = time.Now()
	return t, nil
}

// count counts the outcome of an attempt that allow let through:
// accepted tells whether the backend accepted it.
func (t *Throttle) count(accepted bool) {
	if accepted {
		t.w.b.Add(1)
	}
	if t.w.a.Add(1)&clockEvery == 0 {
		t.w.tick(defaults.ThrottleWindow)
	}
}

// Probability returns the current probability that the Throttle rejects
// an attempt: 1 or 0 while [Throttle.Override] forces every attempt rejected
// or allowed, otherwise the rule's, from the requests and accepts in the
// window (it reads the clock to age the window).
func (t *Throttle) Probability() float64 {
	switch st := t.state.Load(); {
	case st&throttleForceReject != 0:
		return 1
	case st&throttleForceAllow != 0:
		return 0
	}
	t.w.tick(defaults.ThrottleWindow)
	return t.probability()
}

// probability is the rule's rejection probability as of the window's last
// advance.
func (t *Throttle) probability() float64 {
	requests, accepts := t.counts()
	excess := float64(requests) - t.kValue()*float64(accepts)
	if excess <= 0 {
		return 0
	}
	maxP := defaults.ThrottleMaxProbability
	if t.set {
		maxP = t.maxP
	}
	return min(excess/float64(requests+1), maxP)
}

// counts returns the requests and accepts over the window: this
// process's, plus the other processes' as last synced (zero while local).
func (t *Throttle) counts() (requests, accepts int64) {
	requests, accepts = t.w.counts()
	return requests + t.w.fa.Load(), accepts + t.w.fb.Load()
}

func (t *Throttle) kValue() float64 {
	if !t.set {
		return defaults.ThrottleK
	}
	return t.k
}

func (t *Throttle) allow() bool {
	// Fast path, no division: requests ≤ K × accepts means p = 0, and
	// state 0 means no override and no change of state to report.
	if t.state.Load() == 0 {
		if requests, accepts := t.counts(); float64(requests) <= t.kValue()*float64(accepts) {
			return true
		}
	}
	return t.allowSlow()
}

// allowSlow decides while the Throttle rejects, is overridden, or is about
// to start or stop rejecting.
func (t *Throttle) allowSlow() bool {
	switch st := t.state.Load(); {
	case st&throttleForceReject != 0:
		return false // nothing was sent: nothing to count
	case st&throttleForceAllow != 0:
		return true
	}
	t.w.tick(defaults.ThrottleWindow) // make sure the window is current
	p := t.probability()
	t.setRejecting(p > 0)
	if p <= 0 || rand.Float64() >= p {
		return true
	}
	if t.countRej {
		t.w.a.Add(1)
	}
	return false
}

// setRejecting records whether the Throttle rejects, and tells the
// Observer when that changes.
func (t *Throttle) setRejecting(on bool) {
	for {
		st := t.state.Load()
		next := st &^ throttleRejecting
		if on {
			next |= throttleRejecting
		}
		if st == next {
			return
		}
		if t.state.CompareAndSwap(st, next) {
			if t.observer != nil {
				kind := EventThrottleStopped
				if on {
					kind = EventThrottleStarted
				}
				t.observer.Observe(context.Background(), Event{Kind: kind})
			}
			return
		}
	}
}

// ThrottleOverride is a manual override of a [Throttle]'s decisions, set
// with [Throttle.Override].
type ThrottleOverride uint8

const (
	// ThrottleAuto releases an override: the rule decides again (the
	// zero ThrottleOverride).
	ThrottleAuto ThrottleOverride = iota
	// ThrottleRejectAll rejects every attempt, as an open circuit breaker
	// does, until released. The rejected attempts are not counted.
	ThrottleRejectAll
	// ThrottleAllowAll lets every attempt through, as a closed breaker
	// does, until released. Their outcomes are still counted, so the rule
	// decides from them once released.
	ThrottleAllowAll
)

// Override forces the Throttle's decisions until the next Override: every
// attempt rejected ([ThrottleRejectAll], an incident's manual isolation),
// none rejected ([ThrottleAllowAll]), or back to the rule
// ([ThrottleAuto]). Forcing rejection tells the Observer that rejection
// started and forcing none that it stopped, if that changes; after a
// release the next decision tells it what the rule decides. An override
// is this process's only: a Throttle shared with a fleet does not pass it
// on. Safe for concurrent use; values other than the three are treated as
// ThrottleAuto.
func (t *Throttle) Override(o ThrottleOverride) {
	var force uint32
	switch o {
	case ThrottleRejectAll:
		force = throttleForceReject
	case ThrottleAllowAll:
		force = throttleForceAllow
	}
	for {
		st := t.state.Load()
		if t.state.CompareAndSwap(st, st&throttleRejecting|force) {
			break
		}
	}
	switch o {
	case ThrottleRejectAll:
		t.setRejecting(true)
	case ThrottleAllowAll:
		t.setRejecting(false)
	}
}

// Overridden returns the override set with [Throttle.Override]
// (ThrottleAuto when none).
func (t *Throttle) Overridden() ThrottleOverride {
	switch st := t.state.Load(); {
	case st&throttleForceReject != 0:
		return ThrottleRejectAll
	case st&throttleForceAllow != 0:
		return ThrottleAllowAll
	}
	return ThrottleAuto
}

// record counts the outcome err of an attempt that was sent.
func (t *Throttle) record(err error) { t.recordTimed(err, false) }

// recordTimed is record for [Do]'s attempts: timedOut says that the
// attempt ran out of its AttemptTimeout, which the default rule counts as
// a rejection whatever error the operation returned.
func (t *Throttle) recordTimed(err error, timedOut bool) {
	if err == nil {
		t.count(true)
		return
	}
	if walk(err, isErrThrottled) {
		return
	}
	if t.accepted != nil {
		t.count(t.accepted(err))
		return
	}
	t.count(!timedOut && !walk(err, isOverload))
}

func isErrThrottled(e error) bool { return e == ErrThrottled }

func isOverload(e error) bool {
	if e == context.DeadlineExceeded {
		return true
	}
	o, ok := e.(interface{ Overloaded() bool })
	return ok && o.Overloaded()
}

// config returns the Throttle's configuration with every default resolved
// (the zero Throttle reports K 2, Window 10 s and MaxProbability 0.9;
// Accepted and Observer are returned as given, nil meaning the default
// rule and no events).
func (t *Throttle) config() ThrottleConfig {
	if !t.set {
		return ThrottleConfig{K: defaults.ThrottleK, Window: defaults.ThrottleWindow, MaxProbability: defaults.ThrottleMaxProbability}
	}
	return ThrottleConfig{K: t.k, Window: t.w.slot * windowSlots, MaxProbability: t.maxP,
		CountRejected: t.countRej, Accepted: t.accepted, Observer: t.observer}
}
