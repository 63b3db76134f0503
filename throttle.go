package retry

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"time"
)

// Defaults of a [Throttle], used where a [ThrottleConfig] field is zero and
// by the zero Throttle.
const (
	// DefaultThrottleK is the SRE book's typical multiplier: the client
	// keeps sending up to about twice what the backend accepts.
	DefaultThrottleK = 2.0
	// DefaultThrottleWindow is the SRE book's history of 2 minutes.
	DefaultThrottleWindow = 2 * time.Minute
)

// ThrottleConfig configures [NewThrottle]. The zero ThrottleConfig means
// all the defaults.
type ThrottleConfig struct {
	// K is the multiplier of accepts in the rejection probability
	// max(0, (requests − K × accepts) / (requests + 1)): the client sends
	// up to about K times what the backend accepts and rejects the rest
	// locally. Lower values throttle harder (the SRE book cites 1.1).
	// Zero means DefaultThrottleK (2); values below 1, which would throttle
	// a healthy backend, and NaN or +Inf are invalid.
	K float64

	// Window is how long requests and accepts are remembered, kept in 10
	// slots of Window/10 (an event is forgotten between 0.9 × Window and
	// Window after it happened). Zero means DefaultThrottleWindow (2 min);
	// values below 1 ms are invalid. After an outage in which nothing was
	// accepted, the share of attempts let through grows by about K per
	// Window, so a total outage is followed by several windows of little
	// traffic: a window of seconds recovers sooner.
	Window time.Duration

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
}

// Throttle is adaptive client-side throttling as the Google SRE book
// describes it ("Handling Overload"): it remembers, over a window, the
// requests made (attempts sent and attempts it rejected) and how many the
// backend accepted, and rejects each new attempt locally with probability
//
//	max(0, (requests − K × accepts) / (requests + 1))
//
// so that a client keeps sending about K times what an overloaded backend
// accepts instead of all its demand. An attempt it rejects in [Do] fails
// with [ErrThrottled] without calling the operation and is retried like any
// failure. Attempts in flight are counted when their outcome is known, so
// a new Throttle does not reject a burst of first requests.
//
// A Throttle is meant to be shared, through Policy.Throttle or a transport,
// by every caller of the same backend; it is safe for concurrent use.
// Deciding takes a few atomic loads, and counting an outcome two atomic
// adds, with no lock and no allocation. The clock is read once per 64
// outcomes, and before each decision while the rejection probability is
// above zero; between readings events are dated to the last reading, so the
// window may end up to 64 events late while the backend is healthy.
//
// Processes can share one Throttle through a store
// (retryshare.Throttle): the rejection
// probability is then computed from the requests and accepts of the whole
// fleet, as last synced through [Throttle.SetFleet].
//
// Get one with [NewThrottle]. The zero Throttle is ready to use with the
// defaults (K 2, window 2 minutes, the default Accepted rule). A Throttle
// must not be copied after first use.
type Throttle struct {
	w        window // a: requests; b: accepts
	k        float64
	accepted func(error) bool
	set      bool // false for the zero Throttle: use the defaults
}

// NewThrottle returns a Throttle configured by c, or an error naming the
// invalid field.
func NewThrottle(c ThrottleConfig) (*Throttle, error) {
	k, win := c.K, c.Window
	switch {
	case k != 0 && !(k >= 1 && !math.IsInf(k, 1)):
		return nil, errors.New("retry: ThrottleConfig.K must be zero (2) or a finite number of at least 1")
	case win < 0 || (win > 0 && win < time.Millisecond):
		return nil, errors.New("retry: ThrottleConfig.Window must be zero (2 min) or at least 1ms, got " + win.String())
	}
	if k == 0 {
		k = DefaultThrottleK
	}
	if win == 0 {
		win = DefaultThrottleWindow
	}
	t := &Throttle{k: k, accepted: c.Accepted, set: true}
	t.w.slot = win / windowSlots
	t.w.start = time.Now()
	return t, nil
}

// Allow reports whether an attempt may be sent now. When it returns false
// the attempt counts as a request that the backend did not accept, and the
// caller must not send it. When it returns true the caller sends the
// attempt and must then call [Throttle.Record] with its outcome. [Do] does
// both through Policy.Throttle; Allow and Record are for transports and
// clients that do not go through Do.
func (t *Throttle) Allow() bool { return t.allow() }

// Record counts the outcome of an attempt that Allow let through:
// accepted tells whether the backend accepted it.
func (t *Throttle) Record(accepted bool) {
	if accepted {
		t.w.b.Add(1)
	}
	if t.w.a.Add(1)&clockEvery == 0 {
		t.w.tick(DefaultThrottleWindow)
	}
}

// Probability returns the current probability that Allow rejects an
// attempt, from the requests and accepts in the window as of the last
// clock reading.
func (t *Throttle) Probability() float64 {
	requests, accepts := t.counts()
	excess := float64(requests) - t.kValue()*float64(accepts)
	if excess <= 0 {
		return 0
	}
	return excess / float64(requests+1)
}

// counts returns the requests and accepts over the window: this
// process's, plus the other processes' as last synced (zero while local).
func (t *Throttle) counts() (requests, accepts int64) {
	requests, accepts = t.w.counts()
	return requests + t.w.fa.Load(), accepts + t.w.fb.Load()
}

func (t *Throttle) kValue() float64 {
	if !t.set {
		return DefaultThrottleK
	}
	return t.k
}

func (t *Throttle) allow() bool {
	// Fast path, no division: requests ≤ K × accepts means p = 0.
	if requests, accepts := t.counts(); float64(requests) <= t.kValue()*float64(accepts) {
		return true
	}
	t.w.tick(DefaultThrottleWindow) // throttling: make sure the window is current
	p := t.Probability()
	if p <= 0 || rand.Float64() >= p {
		return true
	}
	t.w.a.Add(1)
	return false
}

// record counts the outcome err of an attempt that was sent.
func (t *Throttle) record(err error) { t.recordTimed(err, false) }

// recordTimed is record for [Do]'s attempts: timedOut says that the
// attempt ran out of its AttemptTimeout, which the default rule counts as
// a rejection whatever error the operation returned.
func (t *Throttle) recordTimed(err error, timedOut bool) {
	if err == nil {
		t.Record(true)
		return
	}
	if walk(err, isErrThrottled) {
		return
	}
	if t.accepted != nil {
		t.Record(t.accepted(err))
		return
	}
	t.Record(!timedOut && !walk(err, isOverload))
}

func isErrThrottled(e error) bool { return e == ErrThrottled }

func isOverload(e error) bool {
	if e == context.DeadlineExceeded {
		return true
	}
	o, ok := e.(interface{ Overloaded() bool })
	return ok && o.Overloaded()
}
