package retry

import (
	"context"
	"errors"
	"iter"
	"math"
	"math/rand/v2"
	"time"

	"github.com/retrykit/retry/internal/jitterseed"
)

// Do calls op until it succeeds or a stop rule of p ends the loop, waiting
// between attempts as p says. It returns nil on success; the error of
// p.Validate, without calling op, for an invalid policy; and otherwise an
// [*Error] that wraps op's last error and says why the loop stopped.
//
// Each attempt receives ctx, or a child of it bounded by p.AttemptTimeout.
// Cancelling ctx ends a wait at once. No wait starts that would end after
// ctx's deadline (or exactly at it) or after p.MaxElapsed: Do gives up at
// once instead.
//
// When op succeeds at the first attempt, Do allocates nothing and reads no
// clock (a MaxElapsed makes it read the clock once, twice with an
// AttemptTimeout, which makes it create the attempt's context; a Budget or
// Throttle reads the clock once every 64 calls to age its window, and an
// Observer is called twice: EventAttempt and EventDone).
//
// If op panics, the panic propagates to the caller of Do; the attempt's
// context (with AttemptTimeout) is cancelled first.
func Do(ctx context.Context, p Policy, op func(context.Context) error) error {
	return run(ctx, &p, op)
}

// DoValue is [Do] for an operation that returns a value. On success it
// returns op's value; when it gives up, it returns the value of the last
// call of op (often the zero value) together with the [*Error], even when
// the last attempt was one a Throttle rejected without calling op.
func DoValue[T any](ctx context.Context, p Policy, op func(context.Context) (T, error)) (T, error) {
	// The plain first attempt calls op directly, without the adapter
	// closure below, as run would: same checks, same order.
	// p.plain() && p.fastValid(), in fewer comparisons: plain needs
	// MaxElapsed and AttemptTimeout <= 0, fastValid >= 0.
	if p.Throttle == nil && p.Budget == nil && p.Observer == nil && p.MaxElapsed|p.AttemptTimeout == 0 &&
		p.MaxDelay >= 0 && p.validShape() && ctx.Err() == nil {
		v, err := op(ctx)
		if err == nil {
			return v, nil
		}
		err = p.retryLoop(ctx, func(ctx context.Context) error {
			var err error
			v, err = op(ctx)
			return err
		}, err, false, time.Time{}, nil)
		return v, err
	}
	var v T
	err := run(ctx, &p, func(ctx context.Context) error {
		var err error
		v, err = op(ctx)
		return err
	})
	return v, err
}

// run is the loop behind Do and DoValue. The first attempt is kept short so
// that the success path reads no clock and allocates nothing.
func run(ctx context.Context, p *Policy, op func(context.Context) error) error {
	if !p.fastValid() {
		if err := p.validateSlow(); err != nil {
			return err
		}
	}
	var start time.Time
	if p.MaxElapsed > 0 {
		start = time.Now()
	}
	if err := ctx.Err(); err != nil {
		return p.giveUp(ctx, &Error{Reason: ReasonContext, Cause: err}, start, 0)
	}
	var (
		err      error
		timedOut bool
	)
	if p.Throttle == nil && p.Budget == nil && p.AttemptTimeout <= 0 && p.Observer == nil {
		// The plain first attempt, without a call to attempt; on success
		// there is no Observer to tell.
		if err = op(ctx); err == nil {
			return nil
		}
	} else if err, timedOut = p.attempt(ctx, op, 1, start, 0); err == nil {
		if p.Observer != nil {
			p.Observer.Observe(ctx, Event{Kind: EventDone, Attempt: 1, MaxAttempts: p.maxAttempts()})
		}
		return nil
	}
	return p.retryLoop(ctx, op, err, timedOut, start, nil)
}

// plain reports whether an attempt is a bare call of op (no Throttle,
// Budget, AttemptTimeout or Observer) and the loop needs no clock before it
// (no MaxElapsed).
func (p *Policy) plain() bool {
	return p.Throttle == nil && p.Budget == nil && p.AttemptTimeout <= 0 && p.MaxElapsed <= 0 && p.Observer == nil
}

// attempt makes attempt number n, through the Throttle and Budget if set,
// and reports it to the Observer; waited is the sum of the waits before it.
// timedOut reports that the attempt's own AttemptTimeout expired while ctx
// was still alive.
func (p *Policy) attempt(ctx context.Context, op func(context.Context) error, n int, start time.Time, waited time.Duration) (err error, timedOut bool) {
	if p.Throttle != nil && !p.Throttle.allow() {
		if p.Observer != nil {
			p.Observer.Observe(ctx, Event{Kind: EventThrottled, Attempt: n, MaxAttempts: p.maxAttempts(), Err: ErrThrottled, Waited: waited})
		}
		return ErrThrottled, false
	}
	if p.Budget != nil {
		p.Budget.record(n > 1)
	}
	if p.AttemptTimeout > 0 {
		err, timedOut = p.timedAttempt(ctx, op, n, start, waited)
	} else {
		if p.Observer != nil {
			p.Observer.Observe(ctx, Event{Kind: EventAttempt, Attempt: n, MaxAttempts: p.maxAttempts(), Waited: waited})
		}
		err = op(ctx)
	}
	if p.Throttle != nil {
		p.Throttle.recordTimed(err, timedOut)
	}
	return err, timedOut
}

// timedAttempt calls op under a child of ctx bounded by AttemptTimeout, and
// by what is left of MaxElapsed (from start) when that is less, cancelled
// on every path out, a panic included.
func (p *Policy) timedAttempt(ctx context.Context, op func(context.Context) error, n int, start time.Time, waited time.Duration) (err error, timedOut bool) {
	d := p.AttemptTimeout
	if p.MaxElapsed > 0 {
		d = min(d, max(p.MaxElapsed-time.Since(start), 1))
	}
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if p.Observer != nil {
		p.Observer.Observe(actx, Event{Kind: EventAttempt, Attempt: n, MaxAttempts: p.maxAttempts(), Waited: waited})
	}
	err = op(actx)
	return err, err != nil && actx.Err() == context.DeadlineExceeded && ctx.Err() == nil
}

// retryLoop runs from the first failure on. With a burster (a hedged
// call), each attempt is a burst of copies instead of a call of op.
func (p *Policy) retryLoop(ctx context.Context, op func(context.Context) error, err error, timedOut bool, start time.Time, b burster) error {
	if start.IsZero() {
		start = time.Now()
	}
	maxAttempts := p.maxAttempts()
	var (
		timer  *time.Timer
		prev   time.Duration
		waited time.Duration // sum of the waits so far
		made   error         // the error of the last attempt made (not rejected by the Throttle)
	)
	observed := p.Observer != nil || p.Logger != nil
	// A test may fix the jitter through the context (retrytest.Seed);
	// looked up only where a draw can happen, once per failed call.
	var src *rand.Rand
	if p.Initial != Immediate && p.Jitter.kind != jitterNone {
		src = jitterseed.Rand(ctx)
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	n := 1 // attempts made
	if b != nil {
		n = b.attempts() // the first burst's
	}
	for ; ; n++ {
		if err != ErrThrottled {
			made = err
		}
		fail := func(r Reason, cause error) error {
			last := err
			if err == ErrThrottled && made != nil {
				// The Throttle rejected the attempts after one that was
				// made: keep that one's error, which says what the
				// backend answered, beside ErrThrottled.
				last = &throttledError{made: made}
			}
			return p.giveUp(ctx, &Error{Attempts: n, Err: last, Reason: r, Cause: cause}, start, waited)
		}
		if r, cause := p.stopReason(ctx, err, timedOut); r != 0 {
			return fail(r, cause)
		}
		if maxAttempts != Unlimited && n >= maxAttempts {
			return fail(ReasonAttempts, nil)
		}
		d := p.delay(n-1, prev, src)
		prev = d
		if ra, ok := RetryAfter(err); ok && ra > d {
			d = ra
		}
		// The clock is read only when something needs it: a time budget, a
		// deadline, or a hook that reports the elapsed time.
		dl, hasDeadline := ctx.Deadline()
		var elapsed time.Duration
		if p.MaxElapsed > 0 || hasDeadline || observed {
			now := time.Now()
			elapsed = now.Sub(start)
			// As for the deadline below, a wait that ends when the budget
			// does would leave the attempt no time: give up.
			if p.MaxElapsed > 0 && d >= p.MaxElapsed-elapsed {
				return fail(ReasonTimeBudget, nil)
			}
			// A wait that ends at the deadline would leave the attempt no
			// time at all: give up as for one that ends past it.
			if hasDeadline && d > 0 && d >= dl.Sub(now) {
				return fail(ReasonDeadline, context.DeadlineExceeded)
			}
		}
		if p.Budget != nil && !p.Budget.allowRetry() {
			if observed {
				p.emit(ctx, Event{Kind: EventBudgetRefused, Attempt: n, MaxAttempts: maxAttempts, Err: err, Waited: waited, Elapsed: elapsed})
			}
			return fail(ReasonBudget, nil)
		}
		if observed {
			p.emit(ctx, Event{Kind: EventRetry, Attempt: n, MaxAttempts: maxAttempts, Err: err, Delay: d, Waited: waited, Elapsed: elapsed})
		}
		if d > 0 {
			var waitStart time.Time
			if observed {
				waitStart = time.Now() // for a wait that the context cuts short
			}
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			select {
			case <-timer.C:
			case <-ctx.Done():
				if observed {
					waited = addSat(waited, min(d, time.Since(waitStart)))
				}
				return fail(ReasonContext, ctx.Err())
			}
		}
		waited = addSat(waited, d)
		// Also after a wait: a context cancelled as the timer fired may
		// have lost the select to it, and no attempt starts once it ended.
		if cerr := ctx.Err(); cerr != nil {
			return fail(ReasonContext, cerr)
		}
		if b != nil {
			var k int
			err, timedOut, k = b.burst(waited)
			n += k - 1 // the burst's attempts, less the one the loop counts
		} else {
			err, timedOut = p.attempt(ctx, op, n+1, start, waited)
		}
		if err == nil {
			if p.Observer != nil {
				p.Observer.Observe(ctx, Event{Kind: EventDone, Attempt: n + 1, MaxAttempts: maxAttempts, Waited: waited})
			}
			return nil
		}
	}
}

// addSat returns a+b for non-negative durations, saturating at the
// largest Duration.
func addSat(a, b time.Duration) time.Duration {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}

// stopReason says whether err ends the loop, and with which context error.
func (p *Policy) stopReason(ctx context.Context, err error, timedOut bool) (Reason, error) {
	if IsPermanent(err) {
		return ReasonPermanent, nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return ReasonContext, cerr
	}
	// An inner loop that gave up ends this one even when its last error
	// was a Throttle's rejection (retrying it here would multiply the
	// layers' attempts exactly when the backend is overloaded), and even
	// when this loop's AttemptTimeout cut it short once it had retried. An
	// inner loop cut short in its first attempt never retried: retrying it
	// here multiplies nothing, and is what AttemptTimeout is for.
	if !p.RetryExhausted && IsExhausted(err) && (!timedOut || retriedBelow(err)) {
		return ReasonExhausted, nil
	}
	if timedOut {
		return 0, nil
	}
	if p.Throttle != nil && errors.Is(err, ErrThrottled) {
		return 0, nil
	}
	if p.Retryable != nil {
		if !p.Retryable(err) {
			return ReasonPermanent, nil
		}
		return 0, nil
	}
	if isContextErr(err) && !(p.RetryExhausted && IsExhausted(err)) {
		// A context error of the operation's own, not of an inner loop
		// that RetryExhausted lets this one retry (its attempts may have
		// run out of their AttemptTimeout).
		return ReasonPermanent, nil
	}
	return 0, nil
}

// retriedBelow reports whether an inner retry loop in err's chain made more
// than one attempt, or an error says it was exhausted without an [*Error]
// to count its attempts (another library's, a Retry-Exhausted response).
func retriedBelow(err error) bool {
	return walk(err, func(e error) bool {
		if re, ok := e.(*Error); ok {
			return re.Attempts > 1
		}
		x, ok := e.(interface{ Exhausted() bool })
		return ok && x.Exhausted()
	})
}

// giveUp fills in e.Elapsed, reports EventDone and returns e.
func (p *Policy) giveUp(ctx context.Context, e *Error, start time.Time, waited time.Duration) error {
	if !start.IsZero() {
		e.Elapsed = time.Since(start)
	}
	if p.Observer != nil || p.Logger != nil {
		p.emit(ctx, Event{Kind: EventDone, Attempt: e.Attempts, MaxAttempts: p.maxAttempts(), Err: e,
			Waited: waited, Elapsed: e.Elapsed, Reason: e.Reason})
	}
	return e
}

// Delays returns the waits that p would use, retry by retry: it yields
// (1, wait before retry 1), (2, wait before retry 2), … with jitter drawn
// as [Do] draws it, so every iteration gives a fresh sample. The sequence
// ends after MaxAttempts-1 waits, or as soon as the waits alone would reach
// MaxElapsed; with [Unlimited] it ends only then, so with no MaxElapsed, or
// with [Immediate] (zero waits never add up to it, while Do's attempts take
// time), it never ends: break out of the loop. Waits requested by servers ([After]) are not included. An
// invalid policy yields nothing: check [Policy.Validate] first.
func (p Policy) Delays() iter.Seq2[int, time.Duration] {
	return func(yield func(int, time.Duration) bool) {
		if p.validate() != nil {
			return
		}
		maxAttempts := p.maxAttempts()
		var prev, total time.Duration
		for n := 1; maxAttempts == Unlimited || n < maxAttempts; n++ {
			d := p.delay(n-1, prev, nil)
			prev = d
			if p.MaxElapsed > 0 {
				if d >= p.MaxElapsed-total && d > 0 {
					return // as Do: a wait that ends at the budget leaves no time
				}
				total += d
			}
			if !yield(n, d) {
				return
			}
		}
	}
}
