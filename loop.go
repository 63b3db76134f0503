package retry

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/retrykit/retry/internal/jitterseed"
)

// Loop is the retry loop of one call, for a client that makes the
// attempts itself: gax's Retryer, the AWS SDK's RetryerV2, a gRPC stream
// that replays its messages. The client tells the Loop about each attempt
// and the Loop decides, as [Do] does (Do is built on it): the waits, the
// stop rules, the Budget and the Throttle, the Observer's events, the
// Logger's lines, the reasons and the final [*Error].
//
// A call goes:
//
//	l := p.Loop()
//	for {
//		actx, err := l.Begin(ctx) // ErrThrottled: not sent, still an attempt
//		if err == nil {
//			err = send(actx)
//		}
//		if err == nil {
//			l.Succeeded(ctx)
//			return nil
//		}
//		if _, stop := l.Failed(ctx, err); stop != nil {
//			return stop // an *Error
//		}
//		if stop := l.Wait(ctx); stop != nil {
//			return stop
//		}
//	}
//
// A client whose own loop waits (gax, valkey-go) hands the wait that Failed
// returns to it instead of calling Wait. It may Begin the retry before that
// wait; when the Throttle rejects it, Failed judges the next wait from the
// end of the one not yet waited, so the waits never reach past MaxElapsed
// or the deadline. The zero Loop is not usable: get one from
// [Policy.Loop]. A Loop is one call's state, used by one goroutine at a
// time; it allocates nothing itself but the timer of Wait and, with an
// AttemptTimeout, the attempt's context.
type Loop struct {
	p *Policy
	s loopState
}

// loopState is a Loop without its policy, which its methods take apart:
// escape analysis does not tell one field of a struct from another, and
// an error kept here that reaches the heap must not take a policy on Do's
// stack with it.
type loopState struct {
	n      int           // attempts made, sent or rejected by the Throttle
	prev   time.Duration // the previous computed wait
	wait   time.Duration // the wait Failed granted, not yet counted in waited
	waited time.Duration // the waits so far
	due    time.Duration // when the last wait granted ends, since start (read with the clock)
	start  time.Time     // start of the call (MaxElapsed), else of the first failure
	until  time.Time     // the end of a time budget set by Until, or zero
	err    error         // the error of the attempt last judged
	made   error         // the error of the last attempt made (not rejected)
	timer  *time.Timer
	actx   context.Context // the attempt's own context (AttemptTimeout)
	cancel context.CancelFunc
	state  attemptState
	src    *rand.Rand // the jitter's source under a test's seed (retrytest.Seed); nil: the process's
	seeded bool       // src was looked up
}

// attemptState is where a Loop stands in its current attempt.
type attemptState uint8

const (
	attemptNone     attemptState = iota // no attempt in progress
	attemptSent                         // Begin or Sent let it through
	attemptRecorded                     // sent, its outcome told to the Throttle (Record)
	attemptRejected                     // the Throttle rejected it
)

// Loop returns the retry loop of one call governed by p, before its first
// attempt. The Loop reads p through this pointer: p must not change, and
// must stay valid, until the call ends. With a MaxElapsed it reads the
// clock, the start of the call's time budget; otherwise it costs nothing.
// Check p with [Policy.Validate] first: a Loop assumes a valid policy.
func (p *Policy) Loop() Loop {
	l := Loop{p: p}
	l.s.init(p)
	return l
}

func (l *loopState) init(p *Policy) {
	if p.MaxElapsed > 0 {
		l.start = time.Now()
	}
}

// Attempts returns the number of attempts made so far: those Begin or Sent
// let through, those the Throttle rejected, and those reported to
// Succeeded or Failed without a Begin.
func (l *Loop) Attempts() int { return l.s.n }

// Until ends the call's time budget at t, when that is sooner than
// MaxElapsed's end: Failed then starts no wait that would end at or past t
// and gives up with ReasonTimeBudget instead. For a limit that the client
// learns during the call (an idempotency token that the service forgets
// after a while). The zero t means none.
func (l *Loop) Until(t time.Time) { l.s.until = t }

// Begin starts the next attempt, after a Wait (or the client's own wait)
// for a retry. It asks the Throttle: when it rejects the attempt, Begin
// tells the Observer EventThrottled and returns [ErrThrottled]; the
// attempt counts, must not be sent, and goes to Failed like any failure.
// Otherwise it counts the attempt with the Budget, tells the Observer
// EventAttempt, and returns the context to send it with: ctx, or with an
// AttemptTimeout a child of ctx bounded by it (and by what is left of
// MaxElapsed), which Succeeded or Failed cancels. Every Begin is followed
// by one call of Succeeded or Failed.
func (l *Loop) Begin(ctx context.Context) (context.Context, error) { return l.s.begin(l.p, ctx) }

func (l *loopState) begin(p *Policy, ctx context.Context) (context.Context, error) {
	l.n++
	l.state = attemptSent
	if l.wait != 0 || p.Throttle != nil || p.Budget != nil || p.AttemptTimeout > 0 || p.Observer != nil {
		return l.account(p, ctx)
	}
	return ctx, nil // nothing to count, ask or tell: kept short to be inlined
}

// account is begin's part for a policy with a Throttle, Budget,
// AttemptTimeout or Observer, or after a wait to count.
func (l *loopState) account(p *Policy, ctx context.Context) (context.Context, error) {
	l.waited = addSat(l.waited, l.wait)
	l.wait = 0
	if p.Throttle != nil && !p.Throttle.allow() {
		l.state = attemptRejected
		if p.Observer != nil {
			p.Observer.Observe(ctx, Event{Kind: EventThrottled, Attempt: l.n, MaxAttempts: p.maxAttempts(), Err: ErrThrottled, Waited: l.waited})
		}
		return ctx, ErrThrottled
	}
	if p.Budget != nil {
		p.Budget.record(l.n > 1)
	}
	actx := ctx
	if p.AttemptTimeout > 0 {
		d := p.AttemptTimeout
		if p.MaxElapsed > 0 {
			d = min(d, max(p.MaxElapsed-time.Since(l.start), 1))
		}
		actx, l.cancel = context.WithTimeout(ctx, d)
		l.actx = actx
	}
	if p.Observer != nil {
		p.Observer.Observe(actx, Event{Kind: EventAttempt, Attempt: l.n, MaxAttempts: p.maxAttempts(), Waited: l.waited})
	}
	return actx, nil
}

// Sent is Begin for an attempt that the client sends without asking (gax
// sends a call's first attempt before any Retryer exists): the Throttle is
// not asked, the Budget counts it, the Observer is told EventAttempt, and
// no AttemptTimeout applies.
func (l *Loop) Sent(ctx context.Context) { l.s.sent(l.p, ctx) }

func (l *loopState) sent(p *Policy, ctx context.Context) {
	l.waited = addSat(l.waited, l.wait)
	l.wait = 0
	l.n++
	if p.Budget != nil {
		p.Budget.record(l.n > 1)
	}
	l.state = attemptSent
	if p.Observer != nil {
		p.Observer.Observe(ctx, Event{Kind: EventAttempt, Attempt: l.n, MaxAttempts: p.maxAttempts(), Waited: l.waited})
	}
}

// Record tells the Throttle the outcome of the current attempt (nil when
// it succeeded) as soon as the client learns it, before it calls Succeeded
// or Failed, which then do not tell it again. Without Record they tell it
// themselves; Record matters to a client that sees outcomes apart from its
// retry decisions (grpc.OnFinish, the AWS SDK's release functions). Like
// Unseen, Succeeded and Failed, it counts an attempt that the client made
// without a Begin.
func (l *Loop) Record(err error) { l.s.record(l.p, err) }

func (l *loopState) record(p *Policy, err error) {
	l.made0()
	if l.state != attemptSent {
		return
	}
	l.state = attemptRecorded
	if p.Throttle != nil {
		p.Throttle.recordTimed(err, l.timedOut(nil, err))
	}
}

// Unseen says that the client cannot tell the Throttle the outcome of the
// current attempt, as when a transport reports no success (gax over REST):
// Succeeded and Failed then leave the Throttle untold, so that it never
// counts the failures of a transport whose successes it cannot count.
func (l *Loop) Unseen() { l.s.unseen() }

func (l *loopState) unseen() {
	l.made0()
	if l.state == attemptSent {
		l.state = attemptRecorded
	}
}

// made0 counts an attempt that the client made without a Begin or Sent
// (nothing to ask or tell before it), as Record, Unseen, Succeeded and
// Failed learn of it.
func (l *loopState) made0() {
	if l.state == attemptNone {
		l.n++
		l.state = attemptSent
	}
}

// timedOut reports whether the current attempt ran out of its own
// AttemptTimeout while ctx (nil: not known to have ended) was alive.
func (l *loopState) timedOut(ctx context.Context, err error) bool {
	return err != nil && l.actx != nil && l.actx.Err() == context.DeadlineExceeded && (ctx == nil || ctx.Err() == nil)
}

// end closes the current attempt, which ended with err: it tells the
// Throttle (unless Record or Unseen did, or the Throttle rejected it),
// cancels the attempt's own context, and reports whether that context's
// AttemptTimeout cut the attempt short. An attempt reported without a
// Begin or Sent is counted here.
func (l *loopState) end(p *Policy, ctx context.Context, err error) (timedOut bool) {
	l.made0()
	if l.state != attemptRejected && l.actx != nil {
		timedOut = l.timedOut(ctx, err)
	}
	if l.state == attemptSent && p.Throttle != nil {
		p.Throttle.recordTimed(err, timedOut)
	}
	if l.cancel != nil {
		l.cancel()
		l.cancel, l.actx = nil, nil
	}
	l.state = attemptNone
	return timedOut
}

// Succeeded ends the call after its current attempt succeeded: it tells
// the Throttle and the Observer (EventDone).
func (l *Loop) Succeeded(ctx context.Context) { l.s.succeeded(l.p, ctx) }

func (l *loopState) succeeded(p *Policy, ctx context.Context) {
	if l.state != attemptSent || p.Throttle != nil || l.cancel != nil {
		l.end(p, ctx, nil)
	}
	l.state = attemptNone
	if p.Observer != nil {
		p.Observer.Observe(ctx, Event{Kind: EventDone, Attempt: l.n, MaxAttempts: p.maxAttempts(), Waited: l.waited})
	}
}

// done tells the Observer that the call succeeded.
func (l *loopState) done(p *Policy, ctx context.Context) {
	if p.Observer != nil {
		p.Observer.Observe(ctx, Event{Kind: EventDone, Attempt: l.n, MaxAttempts: p.maxAttempts(), Waited: l.waited})
	}
}

// Failed judges the current attempt, which failed with err ([ErrThrottled]
// for one that Begin rejected), as [Do] judges it. When the loop goes on,
// it returns the wait before the next attempt (the policy's, or a server's
// longer one from [ServerWait]) and a nil error, having withdrawn the retry
// from the Budget and told the Observer and Logger EventRetry. When it
// stops, it returns the [*Error] that ends the call, having told them
// EventDone: return it, or an error that wraps it.
//
// The rules, in order: an error marked [Permanent] stops; so does ctx's
// end (ReasonContext); an error of an inner loop that gave up
// ([IsExhausted]) stops unless RetryExhausted; an attempt cut short by its
// own AttemptTimeout, and a Throttle's rejection, are retried; then
// Retryable, or without it the default rule (context errors stop);
// MaxAttempts; MaxElapsed and ctx's deadline (no wait starts that would
// end at or past them, a wait starting when the last one granted ends);
// the Budget.
func (l *Loop) Failed(ctx context.Context, err error) (time.Duration, error) {
	return l.s.failed(l.p, ctx, err)
}

func (l *loopState) failed(p *Policy, ctx context.Context, err error) (time.Duration, error) {
	return l.judge(p, ctx, err, l.end(p, ctx, err))
}

// judge decides after a failed attempt (or burst of copies); timedOut
// says that its AttemptTimeout cut it short.
func (l *loopState) judge(p *Policy, ctx context.Context, err error, timedOut bool) (time.Duration, error) {
	if l.start.IsZero() {
		l.start = time.Now()
	}
	l.note(err)
	if r, cause := p.stopReason(ctx, err, timedOut); r != 0 {
		return 0, l.fail(p, ctx, err, r, cause)
	}
	if maxAttempts := p.maxAttempts(); maxAttempts != Unlimited && l.n >= maxAttempts {
		return 0, l.fail(p, ctx, err, ReasonAttempts, nil)
	}
	if !l.seeded {
		// A test may fix the jitter through the context (retrytest.Seed);
		// looked up once per failed call, only where a draw can happen.
		l.seeded = true
		if p.Initial != Immediate && p.Jitter.kind != jitterNone {
			l.src = jitterseed.Rand(ctx)
		}
	}
	d := p.delay(l.n-1, l.prev, l.src)
	l.prev = d
	if ra, ok := ServerWaitOf(err); ok && ra > d {
		d = ra
	}
	// The clock is read only when something needs it: a time budget, a
	// deadline, or a hook that reports the elapsed time.
	observed := p.Observer != nil || p.Logger != nil
	dl, hasDeadline := ctx.Deadline()
	var elapsed, due time.Duration
	if p.MaxElapsed > 0 || hasDeadline || observed || !l.until.IsZero() {
		now := time.Now()
		elapsed = now.Sub(l.start)
		// The next wait starts when the last one granted ends: a client
		// that waits itself (gax, valkey-go) comes back before its wait
		// when the Throttle rejects the retry that it was granted for.
		from := elapsed
		if l.due > elapsed {
			from = l.due
			now = l.start.Add(from)
		}
		due = addSat(from, d)
		// As for the deadline below, a wait that ends when the budget
		// does would leave the attempt no time: give up.
		if p.MaxElapsed > 0 && d >= p.MaxElapsed-from || !l.until.IsZero() && d >= l.until.Sub(now) {
			return 0, l.fail(p, ctx, err, ReasonTimeBudget, nil)
		}
		// A wait that ends at the deadline would leave the attempt no
		// time at all: give up as for one that ends past it.
		if hasDeadline && d > 0 && d >= dl.Sub(now) {
			return 0, l.fail(p, ctx, err, ReasonDeadline, context.DeadlineExceeded)
		}
	}
	if p.Budget != nil && !p.Budget.allowRetry() {
		if observed {
			p.emit(ctx, Event{Kind: EventBudgetRefused, Attempt: l.n, MaxAttempts: p.maxAttempts(), Err: err, Waited: l.waited, Elapsed: elapsed})
		}
		return 0, l.fail(p, ctx, err, ReasonBudget, nil)
	}
	if observed {
		p.emit(ctx, Event{Kind: EventRetry, Attempt: l.n, MaxAttempts: p.maxAttempts(), Err: err, Delay: d, Waited: l.waited, Elapsed: elapsed})
	}
	l.wait, l.due = d, due
	return d, nil
}

// Wait waits the wait that Failed granted, or until ctx ends. It returns
// nil when the next attempt may begin, and otherwise, ctx having ended (in
// the wait, or as it ended), the [*Error] that ends the call, with
// ReasonContext, having told the Observer and Logger EventDone.
func (l *Loop) Wait(ctx context.Context) error { return l.s.pause(l.p, ctx) }

func (l *loopState) pause(p *Policy, ctx context.Context) error {
	d := l.wait
	if d > 0 {
		observed := p.Observer != nil || p.Logger != nil
		var waitStart time.Time
		if observed {
			waitStart = time.Now() // for a wait that the context cuts short
		}
		if l.timer == nil {
			l.timer = time.NewTimer(d)
		} else {
			l.timer.Reset(d)
		}
		select {
		case <-l.timer.C:
		case <-ctx.Done():
			l.timer.Stop()
			l.wait = 0
			if observed {
				l.waited = addSat(l.waited, min(d, time.Since(waitStart)))
			}
			return l.fail(p, ctx, l.err, ReasonContext, ctx.Err())
		}
	}
	l.waited = addSat(l.waited, d)
	l.wait = 0
	// Also after a wait: a context cancelled as the timer fired may have
	// lost the select to it, and no attempt starts once it ended.
	if cerr := ctx.Err(); cerr != nil {
		return l.fail(p, ctx, l.err, ReasonContext, cerr)
	}
	return nil
}

// Ended ends the call because its context ended with cause, which a client
// that gets no context (gax's Retryer) learns from err, the error of the
// current attempt: it returns the [*Error] with ReasonContext, having told
// the Observer and Logger EventDone.
func (l *Loop) Ended(ctx context.Context, err, cause error) error {
	return l.s.ended(l.p, ctx, err, cause)
}

func (l *loopState) ended(p *Policy, ctx context.Context, err, cause error) error {
	l.end(p, ctx, err)
	if l.start.IsZero() {
		l.start = time.Now()
	}
	l.note(err)
	return l.fail(p, ctx, err, ReasonContext, cause)
}

// note keeps err, the error of the attempt being judged.
func (l *loopState) note(err error) {
	l.err = err
	if err != ErrThrottled {
		l.made = err
	}
}

// fail ends the call after its attempt failed with err, for reason r.
func (l *loopState) fail(p *Policy, ctx context.Context, err error, r Reason, cause error) error {
	last := err
	if err == ErrThrottled && l.made != nil {
		// The Throttle rejected the attempts after one that was made:
		// keep that one's error, which says what the backend answered,
		// beside ErrThrottled.
		last = &throttledError{made: l.made}
	}
	return p.giveUp(ctx, &Error{Attempts: l.n, Err: last, Reason: r, Cause: cause}, l.start, l.waited)
}
