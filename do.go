package retry

import (
	"context"
	"errors"
	"iter"
	"math"
	"time"
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
		var l loopState // plain: no clock to read
		err = l.drive(&p, ctx, func(ctx context.Context) error {
			var err error
			v, err = op(ctx)
			return err
		}, err)
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

// run is the loop behind Do and DoValue, on the [Loop] seam. The first
// attempt is kept short so that the success path reads no clock and
// allocates nothing.
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
	if p.Throttle == nil && p.Budget == nil && p.AttemptTimeout <= 0 && p.Observer == nil {
		// The plain first attempt, without Begin: nothing to ask or tell,
		// and on success no Observer to tell, nor any loop state to set
		// up. Failed counts it.
		err := op(ctx)
		if err == nil {
			return nil
		}
		l := loopState{start: start}
		return l.drive(p, ctx, op, err)
	}
	l := loopState{start: start}
	var err error
	if p.Throttle == nil && p.Budget == nil && p.AttemptTimeout <= 0 {
		// Only an Observer: Begin and Succeeded spelled out, so that the
		// success path costs no more calls than before the seam.
		l.n, l.state = 1, attemptSent
		p.Observer.Observe(ctx, Event{Kind: EventAttempt, Attempt: 1, MaxAttempts: p.maxAttempts()})
		if err = op(ctx); err == nil {
			p.Observer.Observe(ctx, Event{Kind: EventDone, Attempt: 1, MaxAttempts: p.maxAttempts()})
			return nil
		}
	} else if err = l.attempt(p, ctx, op); err == nil {
		l.succeeded(p, ctx)
		return nil
	}
	return l.drive(p, ctx, op, err)
}

// plain reports whether an attempt is a bare call of op (no Throttle,
// Budget, AttemptTimeout or Observer) and the loop needs no clock before it
// (no MaxElapsed).
func (p *Policy) plain() bool {
	return p.Throttle == nil && p.Budget == nil && p.AttemptTimeout <= 0 && p.MaxElapsed <= 0 && p.Observer == nil
}

// attempt begins the next attempt and, unless the Throttle rejected it,
// calls op with its context.
func (l *loopState) attempt(p *Policy, ctx context.Context, op func(context.Context) error) error {
	if p.AttemptTimeout > 0 {
		return l.timedAttempt(p, ctx, op)
	}
	// begin, spelled out: one call less on Do's success path.
	l.n++
	l.state = attemptSent
	actx := ctx
	if l.wait != 0 || p.Throttle != nil || p.Budget != nil || p.Observer != nil {
		var err error
		if actx, err = l.account(p, ctx); err != nil {
			return err
		}
	}
	return op(actx)
}

// timedAttempt is attempt with an AttemptTimeout: the attempt's own
// context is cancelled on every path out, a panic included.
func (l *loopState) timedAttempt(p *Policy, ctx context.Context, op func(context.Context) error) error {
	actx, err := l.begin(p, ctx)
	if err != nil {
		return err
	}
	defer l.cancel() // Failed still tells its deadline from a cancellation
	return op(actx)
}

// drive runs the loop from the failure of an attempt with err on.
func (l *loopState) drive(p *Policy, ctx context.Context, op func(context.Context) error, err error) error {
	for {
		// failed and pause, spelled out where they have nothing to do:
		// Do's retries cost no more calls than before the seam.
		timedOut := false
		if l.state == attemptSent && p.Throttle == nil && l.actx == nil {
			l.state = attemptNone // nothing to tell or cancel
		} else {
			timedOut = l.end(p, ctx, err)
		}
		if _, stop := l.judge(p, ctx, err, timedOut); stop != nil {
			return stop
		}
		if l.wait > 0 {
			if stop := l.pause(p, ctx); stop != nil {
				return stop
			}
		} else if cerr := ctx.Err(); cerr != nil {
			return l.fail(p, ctx, l.err, ReasonContext, cerr)
		}
		if err = l.attempt(p, ctx, op); err == nil {
			l.succeeded(p, ctx)
			return nil
		}
	}
}

// driveBursts is drive for a hedged call, whose attempts are bursts of
// copies that account for themselves: from the failure of a burst with err
// (timedOut: cut short by its AttemptTimeout) on.
func (l *loopState) driveBursts(p *Policy, ctx context.Context, b burster, err error, timedOut bool) error {
	l.n = b.attempts() // the first burst's
	for {
		if _, stop := l.judge(p, ctx, err, timedOut); stop != nil {
			return stop
		}
		if stop := l.pause(p, ctx); stop != nil {
			return stop
		}
		var k int
		err, timedOut, k = b.burst(l.waited)
		l.n += k
		if err == nil {
			l.done(p, ctx)
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
// time), it never ends: break out of the loop. Waits requested by servers ([ServerWait]) are not included. An
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
