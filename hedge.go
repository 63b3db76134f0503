package retry

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Hedge is [Do] for an operation that is safe to run several times at
// once: when an attempt is slow, it sends another copy without cancelling
// the first, and the first copy to succeed wins. h says when (a fixed or
// adaptive delay) and how many copies may be in flight; &Hedger{} (the
// zero Hedger) hedges with the defaults. A nil h is an error: Hedge
// returns it without calling op, and no event is observed (for no
// hedging, call Do).
//
// The rules, per call:
//
//	event                                   what happens
//	a copy is outstanding h's delay         the next copy is sent (a hedge), up to h's MaxCopies in flight
//	a copy succeeds                         it wins: the others are cancelled, Hedge returns nil
//	a copy fails, retryable, others running the next copy is sent at once (gRFC A6's non-fatal code)
//	a copy fails, not retryable             the call ends: the others are cancelled (gRFC A6's fatal code)
//	a copy fails with a server wait [ServerWait] no more hedges in this burst; the retry after it waits at least the longest such wait
//	the policy's MaxElapsed is spent        no more copies; the call gives up once those in flight return
//	the Budget or Throttle refuses a hedge  no more hedges in this burst; the copies in flight go on
//	every copy in flight failed, retryable  a retry, as in Do: the policy's wait, then a new burst
//
// Hedging and retrying are one loop with one count: every copy is an
// attempt. Policy.MaxAttempts caps the copies sent in all (gRFC A6's
// maxAttempts, which A6 also caps at 5); a failure while other copies are
// in flight sends the next copy at once, and a failure that leaves none in
// flight is retried after the policy's wait, as Do retries it, with every
// stop rule of Do. With Policy.Initial set to [Immediate], that retry is
// A6's next hedge sent at once. One rule differs from A6: a server wait
// stops the burst's hedges and holds the retry after it, where A6 sends
// the next hedge once the wait is over, even with copies in flight.
// Layers still do not multiply: an error of an inner loop that gave up
// ends the call as in Do.
//
// A failure loses to a slower success: a copy that fails fast, while
// another is in flight, never ends the call unless it is not retryable.
//
// Every copy but the call's first is a retry for the policy's [Budget]
// and goes through its [Throttle], so one Budget bounds hedges and
// retries together (across a fleet, when the Budget is shared). When
// either refuses a hedge, the call sends no more hedges in that burst and
// waits for the copies in flight.
//
// Each copy runs under its own child of ctx (bounded by AttemptTimeout),
// which [HedgeAttempt] maps to its attempt number. A loser's context is
// cancelled as soon as a copy wins or the call ends; Hedge returns once
// every copy has returned, so that no copy outlives the call. An operation
// must therefore honour its context: one that ignores cancellation delays
// Hedge's return until it ends by itself. The first copy of each burst
// runs on the caller's goroutine, the hedges on goroutines of their own; a
// panic in any copy reaches the caller's goroutine once the other copies
// have been cancelled and have returned.
//
// The Observer sees, besides Do's events, [EventHedge] for each hedge sent,
// [EventHedgeWon] when a hedge wins, [EventHedgeCancelled] for each copy
// cancelled and [EventHedgeRefused] for each hedge refused. With hedging,
// events come one at a time from several goroutines: the caller's, the
// copies', and the hedge timer's (a hedge sent or refused when the delay
// runs out).
//
// Cost: a call whose first copy answers before the delay arms and stops
// one timer and creates the copy's context; without an AttemptTimeout it
// allocates 4 times in all (see the package benchmarks). An adaptive
// Hedger also reads the clock twice to learn the latency.
func Hedge(ctx context.Context, p Policy, h *Hedger, op func(context.Context) error) error {
	if h == nil {
		return errNilHedger
	}
	_, err := hedgeValue[struct{}](ctx, &p, h, nil, op)
	return err
}

// HedgeValue is [Hedge] for an operation that returns a value: on success
// it returns the winner's value; when it gives up, the value of the last
// copy that failed (after a server's wait, [ServerWait], that of the copy that
// asked for the longest one in its burst). The values of copies that
// lost are dropped: an operation whose value holds a resource (an open
// response) must release it itself when it learns that it lost (its
// context is then cancelled). Every copy's context ends once the copy has
// returned, the winner's included (as an attempt's does in Do with an
// AttemptTimeout): a value that still reads through it, such as the body
// of an HTTP response whose request used it, must be read inside op, or
// made on a context of the caller's (retryhttp.Transport's Hedge does
// that, so that the winner's body stays readable).
// A nil h is an error, as in Hedge.
func HedgeValue[T any](ctx context.Context, p Policy, h *Hedger, op func(context.Context) (T, error)) (T, error) {
	if h == nil {
		var zero T
		return zero, errNilHedger
	}
	return hedgeValue(ctx, &p, h, op, nil)
}

// errNilHedger is what Hedge and HedgeValue return for a nil *Hedger: a
// nil and a zero Hedger must not mean opposite things (no hedging and the
// defaults), so nil is refused.
var errNilHedger = errors.New("retry: Hedge with a nil *Hedger (&retry.Hedger{} hedges with the defaults; retry.Do does not hedge)")

// HedgeAttempt returns the attempt number (1 for the first) of the copy of
// a hedged call that ctx was given to, or 0 when ctx is not the context of
// such a copy. An operation uses it to tell the server which attempt it
// is (retryhttp's Retry-Attempt, gRPC's grpc-previous-rpc-attempts).
func HedgeAttempt(ctx context.Context) int {
	n, _ := ctx.Value(copyKey{}).(int)
	return n
}

type copyKey struct{}

// copyCtx is a copy's context: the copy's cancellable context, answering
// copyKey with the attempt number.
type copyCtx struct {
	context.Context
	n int
}

func (c *copyCtx) Value(key any) any {
	if key == (copyKey{}) {
		return c.n
	}
	return c.Context.Value(key)
}

// hedgeValue runs a hedged call of op, or of op0 (Hedge's operation, which
// returns no value) when op is nil.
func hedgeValue[T any](ctx context.Context, p *Policy, h *Hedger, op func(context.Context) (T, error), op0 func(context.Context) error) (T, error) {
	var zero T
	if !p.fastValid() {
		if err := p.validateSlow(); err != nil {
			return zero, err
		}
	}
	var start time.Time
	if p.MaxElapsed > 0 {
		start = time.Now()
	}
	if err := ctx.Err(); err != nil {
		return zero, p.giveUp(ctx, &Error{Reason: ReasonContext, Cause: err}, start, 0)
	}
	c := getCall(ctx, p, h, op, op0)
	c.copies = c.inline[:0]
	c.start = start
	err, timedOut, _ := c.burst(0)
	if err == nil {
		if p.Observer != nil {
			p.Observer.Observe(ctx, Event{Kind: EventDone, Attempt: c.sent, MaxAttempts: c.maxAttempts})
		}
	} else {
		l := loopState{start: c.start}
		err = l.driveBursts(p, ctx, c, err, timedOut)
	}
	v := c.v
	c.release()
	return v, err
}

// getCall returns the state of a new hedged call, from h's pool when a
// call of the same type has left one there.
func getCall[T any](ctx context.Context, p *Policy, h *Hedger, op func(context.Context) (T, error), op0 func(context.Context) error) *hedgeCall[T] {
	c, ok := h.pool.Get().(*hedgeCall[T])
	if !ok {
		c = new(hedgeCall[T])
		c.fire = c.onTimer
	}
	c.p, c.h, c.ctx, c.op, c.op0 = *p, h, ctx, op, op0
	c.maxAttempts, c.maxCopies = p.maxAttempts(), max(h.copies(), 1)
	return c
}

// release gives c back to its Hedger's pool once the call has returned,
// unless a callback of a hedge timer stopped too late may still run on
// it. Nothing of a call that a copy or the caller may still hold is in
// the pool: the copies' contexts and the wake channel are made per call,
// and a timer per arming (a timer or channel made in a synctest bubble
// must not be used outside it).
func (c *hedgeCall[T]) release() {
	if c.pending {
		return
	}
	h := c.h
	c.callState = callState[T]{}
	h.pool.Put(c)
}

// burster is a hedged call as the retry loop sees it: burst makes one
// attempt of the loop, a burst of copies, and says how many attempts it
// made.
type burster interface {
	burst(waited time.Duration) (err error, timedOut bool, made int)
	attempts() int // the attempts made so far, once no copy is in flight
}

func (c *hedgeCall[T]) attempts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent
}

// hedgeCall is the state of one hedged call, reused through its Hedger's
// pool. release resets callState but neither mu nor fire: the goroutine
// that unlocked mu last may still be inside Unlock when the caller,
// having locked it after, gives the state back.
type hedgeCall[T any] struct {
	mu   sync.Mutex
	fire func() // c.onTimer, bound once per hedgeCall
	callState[T]
}

// callState is what a hedged call sets up and updates. The fields from
// sent on are guarded by hedgeCall.mu: the copies' goroutines and the
// hedge timer's callback update them as their events happen.
type callState[T any] struct {
	p           Policy // a copy, so that the caller's stays on its stack
	h           *Hedger
	ctx         context.Context
	op          func(context.Context) (T, error)
	op0         func(context.Context) error // Hedge's operation, when op is nil
	maxAttempts int
	maxCopies   int
	start       time.Time // with a MaxElapsed: when the call started

	sent     int         // attempts of the call so far (copies sent, first copies the Throttle rejected)
	copies   []copyState // the copies in flight
	v        T           // the winner's value, or the last failed copy's
	won      bool        // a copy of this burst succeeded
	fatal    bool        // a copy of this burst failed with an error that ends the call
	stop     bool        // no more hedges in this burst
	pushed   bool        // a copy of this burst failed with a server's wait (After): err is that copy's
	pushback time.Duration
	err      error        // the burst's error: the fatal one, or the last failure
	timedOut bool         // err is that of a copy that ran out of AttemptTimeout
	inline   [1]copyState // the first copy in flight, without an allocation
	timer    *time.Timer  // the hedge timer, while armed
	stale    int          // callbacks of stopped timers still to come, which do nothing
	pending  bool         // at the end of the last burst, a timer's callback was still to come
	waiting  bool         // the caller waits on wake for the copies in flight
	wake     chan struct{}
	waited   time.Duration // the waits of the retry loop before this burst
	panicked any           // a hedge's panic, re-raised on the caller's goroutine
	hasPanic bool
}

// copyState is a copy in flight.
type copyState struct {
	n      int
	cancel context.CancelFunc
	hedge  bool // sent while another copy was in flight
	// cancelled: cancelOthers ended its context (another copy won, or the
	// call ended); whatever it returns then tells the Throttle nothing.
	cancelled bool
	start     time.Time // an adaptive Hedger's: when it was sent
}

// burst runs one burst of copies, the first on the calling goroutine, and
// returns once none is in flight; waited is the retry loop's waits so far.
// It is the attempt of the retry loop: made is the number of attempts it
// made, the copies sent or a first copy the Throttle rejected.
func (c *hedgeCall[T]) burst(waited time.Duration) (err error, timedOut bool, made int) {
	c.mu.Lock()
	before := c.sent
	c.won, c.fatal, c.stop, c.err, c.timedOut, c.waited = false, false, false, nil, false, waited
	c.pushed, c.pushback = false, 0
	n := c.sent + 1
	p := &c.p
	if p.Throttle != nil && !p.Throttle.allow() {
		c.sent++
		if p.Observer != nil {
			p.Observer.Observe(c.ctx, Event{Kind: EventThrottled, Attempt: n, MaxAttempts: c.maxAttempts, Err: ErrThrottled, Waited: waited})
		}
		c.mu.Unlock()
		return ErrThrottled, false, 1
	}
	if p.Budget != nil {
		p.Budget.record(n > 1) // a retry was granted by the loop
	}
	cctx := c.send(n, false)
	c.mu.Unlock()

	v, err, timedOut := c.runFirst(cctx, n)

	c.mu.Lock()
	c.finish(n, v, err, timedOut)
	c.waitCopies()
	made = c.sent - before
	if c.hasPanic {
		c.mu.Unlock()
		panic(c.panicked)
	}
	err, timedOut = c.err, c.timedOut
	if c.won {
		err, timedOut = nil, false
	}
	c.pending = c.stale != 0 || c.timer != nil
	c.mu.Unlock()
	return err, timedOut, made
}

// waitCopies waits until no copy is in flight and stops the hedge timer,
// which serves no more. c.mu must be held; it is released while waiting.
func (c *hedgeCall[T]) waitCopies() {
	for len(c.copies) > 0 {
		if c.wake == nil {
			c.wake = make(chan struct{}, 1)
		}
		c.waiting = true
		c.mu.Unlock()
		<-c.wake
		c.mu.Lock()
	}
	c.disarm() // a timer armed before the last copy failed serves no more
}

// runFirst runs the burst's first copy on the caller's goroutine. If op
// panics, the copy's context is ended and the other copies are cancelled,
// and the panic goes on once they have returned, so that no copy
// outlives the call.
func (c *hedgeCall[T]) runFirst(cctx context.Context, n int) (v T, err error, timedOut bool) {
	ok := false
	defer func() {
		if !ok {
			c.mu.Lock()
			c.fatal = true
			c.cancelOthers(n)
			c.remove(n)
			c.waitCopies()
			c.mu.Unlock()
		}
	}()
	v, err = c.call(cctx)
	ok = true
	return v, err, c.timedOutErr(cctx, err)
}

// call runs the operation once.
func (c *hedgeCall[T]) call(ctx context.Context) (v T, err error) {
	if c.op == nil {
		return v, c.op0(ctx)
	}
	return c.op(ctx)
}

// timedOutErr reports whether err is that of a copy that ran out of its
// AttemptTimeout while the call's context was alive.
func (c *hedgeCall[T]) timedOutErr(cctx context.Context, err error) bool {
	return err != nil && c.p.AttemptTimeout > 0 && cctx.Err() == context.DeadlineExceeded && c.ctx.Err() == nil
}

// send starts copy n: it makes its context, records it in flight, reports
// it and arms the timer for the next hedge. The caller runs the copy.
// c.mu must be held.
func (c *hedgeCall[T]) send(n int, hedge bool) context.Context {
	p := &c.p
	var (
		cctx   context.Context
		cancel context.CancelFunc
	)
	if d := p.AttemptTimeout; d > 0 {
		if p.MaxElapsed > 0 {
			d = min(d, max(p.MaxElapsed-time.Since(c.start), 1))
		}
		cctx, cancel = context.WithTimeout(c.ctx, d)
	} else {
		cctx, cancel = context.WithCancel(c.ctx)
	}
	cctx = &copyCtx{Context: cctx, n: n}
	s := copyState{n: n, cancel: cancel, hedge: hedge}
	if c.h.adaptive() {
		s.start = time.Now()
	}
	c.copies = append(c.copies, s)
	c.sent++
	if p.Observer != nil {
		if hedge {
			p.Observer.Observe(c.ctx, Event{Kind: EventHedge, Attempt: n, MaxAttempts: c.maxAttempts, Waited: c.waited})
		}
		p.Observer.Observe(cctx, Event{Kind: EventAttempt, Attempt: n, MaxAttempts: c.maxAttempts, Waited: c.waited})
	}
	c.arm()
	return cctx
}

// arm starts the timer for the next hedge if one may follow. c.mu must be
// held.
func (c *hedgeCall[T]) arm() {
	c.disarm()
	if c.stop || len(c.copies) >= c.maxCopies || !c.attemptsLeft() {
		return
	}
	d, ok := c.h.Delay()
	if !ok {
		return // an adaptive Hedger warming up
	}
	c.timer = time.AfterFunc(d, c.fire)
}

// disarm stops the hedge timer. A timer that fired already has started
// its callback, which has yet to take c.mu: it is counted in c.stale, and
// the next callback to run does nothing. c.mu must be held.
func (c *hedgeCall[T]) disarm() {
	if c.timer != nil {
		if !c.timer.Stop() {
			c.stale++
		}
		c.timer = nil
	}
}

func (c *hedgeCall[T]) attemptsLeft() bool {
	return c.maxAttempts == Unlimited || c.sent < c.maxAttempts
}

// onTimer is the hedge timer's callback. When a stopped timer's callback
// is still to come, this one, or that one, does nothing: either way one
// hedge is sent, once the armed timer has fired.
func (c *hedgeCall[T]) onTimer() {
	c.mu.Lock()
	if c.stale > 0 {
		c.stale--
	} else if c.timer != nil {
		c.timer = nil
		c.hedge()
	}
	c.mu.Unlock()
}

// hedge sends the next copy, on a goroutine of its own, if the burst may
// still send one and the Throttle and Budget allow it. c.mu must be held.
func (c *hedgeCall[T]) hedge() {
	if c.won || c.fatal || c.stop || len(c.copies) == 0 || len(c.copies) >= c.maxCopies || !c.attemptsLeft() || c.ctx.Err() != nil {
		return
	}
	p := &c.p
	if p.MaxElapsed > 0 && time.Since(c.start) >= p.MaxElapsed {
		// As in Do, no attempt starts once the time budget is spent.
		c.stop = true
		return
	}
	n := c.sent + 1
	refused := func(err error) {
		c.stop = true
		if p.Observer != nil {
			p.Observer.Observe(c.ctx, Event{Kind: EventHedgeRefused, Attempt: n, MaxAttempts: c.maxAttempts, Err: err, Waited: c.waited})
		}
	}
	if p.Throttle != nil && !p.Throttle.allow() {
		refused(ErrThrottled)
		return
	}
	if p.Budget != nil && !p.Budget.allowRetry() {
		refused(ErrBudgetRefused)
		return
	}
	cctx := c.send(n, true)
	go c.runHedge(cctx, n)
}

// runHedge runs hedge copy n on its own goroutine.
func (c *hedgeCall[T]) runHedge(cctx context.Context, n int) {
	ok := false
	defer func() {
		if !ok {
			r := recover()
			c.mu.Lock()
			c.panicked, c.hasPanic, c.fatal = r, true, true
			c.cancelOthers(n)
			c.remove(n)
			c.mu.Unlock()
		}
	}()
	v, err := c.call(cctx)
	timedOut := c.timedOutErr(cctx, err)
	ok = true
	c.mu.Lock()
	c.finish(n, v, err, timedOut)
	c.mu.Unlock()
}

// remove takes copy n out of the copies in flight, ends its context and
// wakes the caller when none is left. c.mu must be held.
func (c *hedgeCall[T]) remove(n int) (copyState, bool) {
	for i, s := range c.copies {
		if s.n == n {
			s.cancel()
			c.copies = append(c.copies[:i], c.copies[i+1:]...)
			if len(c.copies) == 0 && c.waiting {
				c.waiting = false
				c.wake <- struct{}{}
			}
			return s, true
		}
	}
	return copyState{}, false
}

// cancelOthers cancels every copy in flight but n and stops the timer.
// The copies stay in flight until they return. c.mu must be held.
func (c *hedgeCall[T]) cancelOthers(n int) {
	c.disarm()
	p := &c.p
	for i, s := range c.copies {
		if s.n == n {
			continue
		}
		c.copies[i].cancelled = true
		if c.h.adaptive() {
			c.h.observeLoser(time.Since(s.start))
		}
		s.cancel()
		if p.Observer != nil {
			p.Observer.Observe(c.ctx, Event{Kind: EventHedgeCancelled, Attempt: s.n, MaxAttempts: c.maxAttempts, Waited: c.waited})
		}
	}
}

// finish handles the outcome of copy n. c.mu must be held.
func (c *hedgeCall[T]) finish(n int, v T, err error, timedOut bool) {
	decided := c.won || c.fatal
	s, _ := c.remove(n)
	p := &c.p
	if decided {
		// A loser: cancelled, or answering just after the winner. Its
		// value is dropped; a cancelled copy tells the Throttle nothing,
		// unless it succeeded all the same (its error need not be a
		// context error: grpc-go's CANCELLED status wraps none).
		if p.Throttle != nil && (err == nil || !s.cancelled && c.ctx.Err() == nil && !isContextErr(err)) {
			p.Throttle.recordTimed(err, timedOut)
		}
		return
	}
	if p.Throttle != nil {
		p.Throttle.recordTimed(err, timedOut)
	}
	if err == nil {
		c.won, c.v = true, v
		if c.h.adaptive() {
			c.h.observe(time.Since(s.start))
		}
		if s.hedge && p.Observer != nil {
			p.Observer.Observe(c.ctx, Event{Kind: EventHedgeWon, Attempt: n, MaxAttempts: c.maxAttempts, Waited: c.waited})
		}
		c.cancelOthers(n)
		return
	}
	r, _ := p.stopReason(c.ctx, err, timedOut)
	ra, pushback := ServerWaitOf(err)
	if r != 0 || !c.pushed || pushback && ra >= c.pushback {
		// The burst's error. A server's pushback stays it until a longer
		// one or a fatal error: the retry after the burst must wait as
		// the server asked, whatever copy fails after it.
		c.v, c.err, c.timedOut = v, err, timedOut
	}
	if r != 0 {
		c.fatal = true
		c.cancelOthers(n)
		return
	}
	if pushback {
		if ra > 0 {
			c.pushed, c.pushback = true, max(c.pushback, ra)
		}
		c.stop = true // the server pushed back: no more hedges
		c.disarm()
		return
	}
	c.hedge() // try elsewhere at once, if a copy is still in flight
}
