package retry

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"time"
)

// Event describes one failed attempt that is about to be retried. It is
// passed to Policy.OnRetry before the wait starts.
type Event struct {
	Attempt     int           // the attempt that just failed, 1-based
	MaxAttempts int           // the policy's attempt limit, or Unlimited
	Err         error         // the attempt's error
	Delay       time.Duration // the wait about to start
	Elapsed     time.Duration // time since Do started (see Error.Elapsed)
}

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
// clock (a MaxElapsed makes it read the clock once, an AttemptTimeout
// makes it create the attempt's context, and a Budget or Throttle reads the
// clock once every 64 calls to age its window).
func Do(ctx context.Context, p Policy, op func(context.Context) error) error {
	return run(ctx, &p, op)
}

// DoValue is [Do] for an operation that returns a value. On success it
// returns op's value; when it gives up, it returns the value of the last
// attempt (often the zero value) together with the [*Error].
func DoValue[T any](ctx context.Context, p Policy, op func(context.Context) (T, error)) (T, error) {
	// The plain first attempt calls op directly, without the adapter
	// closure below, as run would: same checks, same order.
	if p.plain() && p.fastValid() && ctx.Err() == nil {
		v, err := op(ctx)
		if err == nil {
			return v, nil
		}
		err = p.retryLoop(ctx, func(ctx context.Context) error {
			var err error
			v, err = op(ctx)
			return err
		}, err, false, time.Time{})
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
		return p.giveUp(ctx, &Error{Reason: ReasonContext, Cause: err}, start)
	}
	var (
		err      error
		timedOut bool
	)
	if p.Throttle == nil && p.Budget == nil && p.AttemptTimeout <= 0 {
		err = op(ctx) // the plain first attempt, without a call to attempt
	} else {
		err, timedOut = p.attempt(ctx, op, false)
	}
	if err == nil {
		return nil
	}
	return p.retryLoop(ctx, op, err, timedOut, start)
}

// plain reports whether an attempt is a bare call of op (no Throttle,
// Budget or AttemptTimeout) and the loop needs no clock before it (no
// MaxElapsed).
func (p *Policy) plain() bool {
	return p.Throttle == nil && p.Budget == nil && p.AttemptTimeout <= 0 && p.MaxElapsed <= 0
}

// attempt makes one attempt, through the Throttle and Budget if set.
// timedOut reports that the attempt's own AttemptTimeout expired while ctx
// was still alive.
func (p *Policy) attempt(ctx context.Context, op func(context.Context) error, isRetry bool) (err error, timedOut bool) {
	if p.Throttle != nil && !p.Throttle.allow() {
		return ErrThrottled, false
	}
	if p.Budget != nil {
		p.Budget.record(isRetry)
	}
	if p.AttemptTimeout > 0 {
		actx, cancel := context.WithTimeout(ctx, p.AttemptTimeout)
		err = op(actx)
		timedOut = err != nil && actx.Err() == context.DeadlineExceeded && ctx.Err() == nil
		cancel()
	} else {
		err = op(ctx)
	}
	if p.Throttle != nil {
		p.Throttle.record(err)
	}
	return err, timedOut
}

// retryLoop runs from the first failure on.
func (p *Policy) retryLoop(ctx context.Context, op func(context.Context) error, err error, timedOut bool, start time.Time) error {
	if start.IsZero() {
		start = time.Now()
	}
	maxAttempts := p.maxAttempts()
	var (
		timer *time.Timer
		prev  time.Duration
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for n := 1; ; n++ {
		fail := func(r Reason, cause error) error {
			return p.giveUp(ctx, &Error{Attempts: n, Err: err, Reason: r, Cause: cause}, start)
		}
		if r, cause := p.stopReason(ctx, err, timedOut); r != 0 {
			return fail(r, cause)
		}
		if maxAttempts != Unlimited && n >= maxAttempts {
			return fail(ReasonAttempts, nil)
		}
		d := p.delay(n-1, prev, nil)
		prev = d
		if ra, ok := RetryAfter(err); ok && ra > d {
			d = ra
		}
		// The clock is read only when something needs it: a time budget, a
		// deadline, or a hook that reports the elapsed time.
		dl, hasDeadline := ctx.Deadline()
		var elapsed time.Duration
		if p.MaxElapsed > 0 || hasDeadline || p.OnRetry != nil || p.Logger != nil {
			now := time.Now()
			elapsed = now.Sub(start)
			if p.MaxElapsed > 0 && d > p.MaxElapsed-elapsed {
				return fail(ReasonTimeBudget, nil)
			}
			// A wait that ends at the deadline would leave the attempt no
			// time at all: give up as for one that ends past it.
			if hasDeadline && d > 0 && d >= dl.Sub(now) {
				return fail(ReasonDeadline, context.DeadlineExceeded)
			}
		}
		if p.Budget != nil && !p.Budget.allowRetry() {
			return fail(ReasonBudget, nil)
		}
		if p.OnRetry != nil {
			p.OnRetry(Event{Attempt: n, MaxAttempts: maxAttempts, Err: err, Delay: d, Elapsed: elapsed})
		}
		if p.Logger != nil && p.Logger.Enabled(ctx, slog.LevelDebug) {
			p.Logger.LogAttrs(ctx, slog.LevelDebug, "retry: attempt failed, retrying",
				slog.Int("attempt", n), slog.Int("max_attempts", maxAttempts),
				slog.Duration("delay", d), slog.Duration("elapsed", elapsed),
				slog.String("error", err.Error()))
		}
		if d > 0 {
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			select {
			case <-timer.C:
			case <-ctx.Done():
				return fail(ReasonContext, ctx.Err())
			}
		} else if cerr := ctx.Err(); cerr != nil {
			return fail(ReasonContext, cerr)
		}
		err, timedOut = p.attempt(ctx, op, true)
		if err == nil {
			return nil
		}
	}
}

// stopReason says whether err ends the loop, and with which context error.
func (p *Policy) stopReason(ctx context.Context, err error, timedOut bool) (Reason, error) {
	if IsPermanent(err) {
		return ReasonPermanent, nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return ReasonContext, cerr
	}
	if timedOut || p.Throttle != nil && errors.Is(err, ErrThrottled) {
		return 0, nil
	}
	if !p.RetryExhausted && IsExhausted(err) {
		return ReasonExhausted, nil
	}
	if p.Retryable != nil {
		if !p.Retryable(err) {
			return ReasonPermanent, nil
		}
		return 0, nil
	}
	if isContextErr(err) {
		return ReasonPermanent, nil
	}
	return 0, nil
}

func (p *Policy) giveUp(ctx context.Context, e *Error, start time.Time) error {
	if !start.IsZero() {
		e.Elapsed = time.Since(start)
	}
	if p.Logger != nil && p.Logger.Enabled(ctx, slog.LevelError) {
		attrs := []slog.Attr{
			slog.Int("attempts", e.Attempts),
			slog.Duration("elapsed", e.Elapsed),
			slog.String("reason", e.Reason.String()),
		}
		if e.Err != nil {
			attrs = append(attrs, slog.String("error", e.Err.Error()))
		}
		if e.Cause != nil {
			attrs = append(attrs, slog.String("cause", e.Cause.Error()))
		}
		p.Logger.LogAttrs(ctx, slog.LevelError, "retry: giving up", attrs...)
	}
	return e
}

// Delays returns the waits that p would use, retry by retry: it yields
// (1, wait before retry 1), (2, wait before retry 2), … with jitter drawn
// as [Do] draws it, so every iteration gives a fresh sample. The sequence
// ends after MaxAttempts-1 waits, or as soon as the waits alone would pass
// MaxElapsed; with [Unlimited] and no MaxElapsed it never ends, so break out
// of the loop. Waits requested by servers ([After]) are not included. An
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
				if d > p.MaxElapsed-total {
					return
				}
				total += d
			}
			if !yield(n, d) {
				return
			}
		}
	}
}
