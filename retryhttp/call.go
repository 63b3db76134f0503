package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/retrykit/retry"
)

// call is the state of one RoundTrip.
type call struct {
	t          *Transport
	req        *http.Request   // the caller's request, never modified
	ctx        context.Context // req.Context()
	base       http.RoundTripper
	idem       bool           // method idempotent, idempotency key, or RetryNonIdempotent
	replayable bool           // the body can be sent again: none, GetBody or buffered
	buffered   bool           // buf holds the whole body (no GetBody)
	stream     bool           // too large to buffer: buf is its prefix, sent once
	bodyUsed   bool           // the caller's body was handed to base or closed
	exhaust    bool           // the last response says "already retried below"
	replay     bool           // RoundTrip made the first attempt: firstResp, firstErr are its outcome
	buf        []byte         // buffered body or prefix of a streamed one
	n          int            // attempts sent (base.RoundTrip called)
	last       *http.Response // last retryable response, still open or buffered
	firstResp  *http.Response // result of the attempt made before the loop
	firstErr   error
	// l is the core's retry loop of the call, which makes every decision
	// (waits, stop rules, Budget, Throttle, events, the final error) as
	// in retry.Do, attempt timeouts included.
	l retry.Loop
	// start: when the loop started, with a MaxElapsed (for the Pacer).
	start time.Time
}

// errPanicked is what the loop is told of an attempt during which Base or
// RetryStatus panicked, as that panic goes on up to the caller.
var errPanicked = retry.Permanent(errors.New("retryhttp: the attempt panicked"))

// loop runs the retry loop of c on retry.Loop, the seam retry.Do is built
// on, and turns its outcome into RoundTrip's. When RoundTrip made the
// first attempt itself (c.replay), the loop takes that attempt's outcome as
// its first: reported without a Begin, it is counted there, as the Loop
// documents, and nothing in it is reported twice.
func (c *call) loop() (*http.Response, error) {
	p := &c.t.Policy // valid (RoundTrip checked); fields fixed once in use
	ctx := c.ctx
	c.l = p.Loop()
	if p.MaxElapsed > 0 {
		c.start = time.Now() // for the Pacer's holds
	}
	var resp *http.Response
	var err error
	if c.replay {
		resp, err = c.firstResp, c.firstErr
		c.replay, c.firstResp, c.firstErr = false, nil, nil
	} else if err = c.l.Wait(ctx); err == nil {
		// Wait, before a first attempt, only checks ctx: a call whose
		// context has ended makes no attempt, as in retry.Do.
		resp, err = c.attempt()
	} else {
		return c.gaveUp(err)
	}
	for {
		if err == nil {
			c.l.Succeeded(ctx)
			return c.mark(resp, false), nil
		}
		if _, stop := c.l.Failed(ctx, err); stop != nil {
			return c.gaveUp(stop)
		}
		c.retrying()
		if stop := c.l.Wait(ctx); stop != nil {
			return c.gaveUp(stop)
		}
		resp, err = c.attempt()
	}
}

// gaveUp turns err, the *retry.Error that ended the loop, into RoundTrip's
// outcome.
func (c *call) gaveUp(err error) (*http.Response, error) {
	if !c.bodyUsed && c.req.Body != nil {
		c.req.Body.Close()
	}
	var re *retry.Error
	errors.As(err, &re)
	if c.last != nil && (re == nil || re.Reason != retry.ReasonContext || c.exhaust) {
		// Gave up after a retryable status (perhaps followed by attempts a
		// Throttle rejected, or by a GetBody that failed): hand back the
		// server's last answer. One that a lower layer marked exhausted
		// is returned even if the context ended as it arrived: it was
		// never to be retried.
		exhausted := c.n > 1 || c.exhaust || re != nil && re.Reason != retry.ReasonPermanent
		if exhausted {
			markTracker(c.ctx)
		}
		return c.mark(c.last, exhausted), nil
	}
	if c.last != nil {
		discard(c.last)
		c.last = nil
	}
	if re != nil && re.Reason != retry.ReasonPermanent &&
		(re.Reason != retry.ReasonContext || c.n > 1 && errors.Is(re.Cause, context.DeadlineExceeded)) {
		// Gave up, or retried until the request's deadline (a handler's
		// time budget for its call) ended it: either way the layers above
		// must not retry again. A call cancelled, or cut in its first
		// attempt, was not retried here. The context's own error (Cause)
		// decides, not the last attempt's: a transport timeout (one that
		// matches context.DeadlineExceeded through its Is method) followed
		// by a cancellation is a cancelled call.
		markTracker(c.ctx)
	}
	return nil, err
}

// retrying is called once the loop has decided to retry, before its wait.
// It closes the body of the previous response if release left it open (a
// body longer than maxDrain), so that its connection is freed before the
// wait; the response stays the last answer (a Throttle may still reject
// every attempt left), with a body that ends in errReleased.
func (c *call) retrying() {
	if c.last != nil && c.last.Body != nil && c.last.Body != http.NoBody {
		if pb, open := c.last.Body.(*prefixBody); open || c.last.ContentLength > maxDrain {
			// Its connection cannot be reused: close it without reading
			// more, which a server stalling the body would turn into a
			// wait with no bound. The response itself (status, header,
			// the bytes already read) stays the loop's last answer, in
			// case a Throttle rejects every attempt that remains; its
			// body then ends with errReleased rather than a silent EOF.
			c.last.Body.Close()
			prefix := bytes.NewReader(nil)
			if open {
				prefix = pb.prefix
			}
			c.last.Body = &readBody{r: prefix, err: errReleased}
		}
	}
}

// attempt makes the loop's next attempt: the Pacer's hold, if any, comes
// first, outside the attempt and its AttemptTimeout (a hold is a wait
// before sending, not a slow server); then the Loop's Begin (the Throttle,
// the Budget, EventAttempt and the attempt's own context), then try.
func (c *call) attempt() (resp *http.Response, err error) {
	var held error
	if c.t.Pace != nil {
		var end time.Time
		if me := c.t.Policy.MaxElapsed; me > 0 {
			end = c.start.Add(me)
		}
		held = c.t.pace(c.ctx, c.req, c.l.Attempts()+1, end)
	}
	actx, err := c.l.Begin(c.ctx)
	if err != nil {
		return nil, err // retry.ErrThrottled: not sent
	}
	if held != nil {
		c.l.Unseen() // not sent: nothing for the Throttle to count
		return nil, c.held(held)
	}
	if c.t.Policy.AttemptTimeout <= 0 {
		return c.try(actx) // actx is the caller's context: nothing to end
	}
	done := false
	defer func() {
		if !done {
			// Base or RetryStatus panicked: end the attempt's context,
			// which would stay registered on the caller's, as retry.Do
			// does. The Loop offers that only by ending the call: the
			// Observer sees EventDone (ReasonPermanent, errPanicked), the
			// Throttle is left untold, and the panic goes on.
			c.l.Unseen()
			c.l.Failed(c.ctx, errPanicked)
		}
	}()
	resp, err = c.try(actx)
	done = true
	return resp, err
}

// try sends one attempt with actx, the attempt's context from the Loop,
// and judges its outcome.
func (c *call) try(actx context.Context) (*http.Response, error) {
	// The body comes first, so that a failing GetBody leaves the previous
	// response in place, to be returned when the loop gives up.
	var body io.ReadCloser
	switch {
	case c.n > 0 && !c.replayable:
		// Unreachable: every outcome of an attempt that cannot be sent
		// again is permanent.
		return nil, retry.Permanent(errors.New("retryhttp: request body cannot be sent again"))
	case c.buffered:
		body = http.NoBody
		if len(c.buf) > 0 {
			body = io.NopCloser(bytes.NewReader(c.buf))
		}
	case c.stream:
		body = c.streamBody()
	case c.req.Body == nil || c.req.Body == http.NoBody:
	case c.n == 0:
		body = c.req.Body // the caller's body goes with the first attempt
	default:
		b, err := c.req.GetBody()
		if err != nil {
			if c.last != nil && released(c.last) {
				// As documented: a response whose body was closed
				// before the wait is not returned after GetBody fails.
				c.last = nil
			}
			return nil, retry.Permanent(&getBodyError{err})
		}
		body = b
	}
	if c.last != nil {
		// A retry is happening: release the previous response.
		discard(c.last)
		c.last = nil
	}
	c.n++
	if c.req.Body != nil && !c.buffered {
		c.bodyUsed = true
	}
	if c.t.Policy.AttemptTimeout > 0 {
		return c.tryTimed(actx, body)
	}
	r := c.req
	if c.n > 1 || c.buffered || c.stream {
		r = c.prepare(c.ctx, body)
	}
	resp, err := c.base.RoundTrip(r)
	if err == nil && resp == nil {
		err = errNilResponse
	}
	if err != nil {
		return nil, c.classify(r, err)
	}
	c.t.learn(r, resp)
	return c.judge(r, resp)
}

// held is what the loop sees of an attempt that the Pacer held and did
// not send (err, a *HoldError): the caller's context ended it (the loop
// stops on that), or it would have ended too late (permanent).
func (c *call) held(err error) error {
	if c.ctx.Err() != nil {
		return err
	}
	return retry.Permanent(err)
}

// judge decides what the loop sees for a response to request r.
func (c *call) judge(r *http.Request, resp *http.Response) (*http.Response, error) {
	if !c.t.retryStatus(resp.StatusCode) {
		return resp, nil
	}
	c.last = resp
	e := &statusError{resp: resp, method: r.Method, url: r.URL, attempt: c.n}
	if Exhausted(resp) {
		// Already retried to exhaustion below: do not retry again. The
		// loop reports it as it reports an inner loop's error
		// (ReasonExhausted), unless the policy would retry that.
		c.exhaust = true
		if c.t.Policy.RetryExhausted {
			return resp, retry.Permanent(e)
		}
		return resp, exhaustedError{e}
	}
	if !c.replayable || !c.idem && resp.StatusCode != http.StatusTooManyRequests {
		// Not retried, but still an answer from the server: the loop
		// accounts it (a 429 or 503 is a rejection for a Throttle).
		return resp, retry.Permanent(e)
	}
	err, over := c.t.hinted(resp, e)
	if over && c.mayRetry() {
		// The server asks for more than we honour (or than a Duration
		// holds): give its answer to the caller now. At the last attempt
		// the attempt limit ends the loop anyway, and is what it reports.
		return resp, retry.Permanent(e)
	}
	if c.mayRetry() {
		release(resp)
	}
	return resp, err
}

// mayRetry reports whether the policy's attempt limit leaves room for
// another attempt after the current one: the loop's attempts, those a
// Throttle rejected included, or the c.n sent if more. Other stop rules
// may still end the loop.
func (c *call) mayRetry() bool {
	m := c.t.Policy.MaxAttempts
	if m == 0 {
		m = retry.DefaultMaxAttempts
	}
	return m == retry.Unlimited || max(c.n, c.l.Attempts()) < m
}

// prepare makes the request for an attempt other than a plain first one:
// a clone with ctx, body, and on a retry the attempt header.
func (c *call) prepare(ctx context.Context, body io.ReadCloser) *http.Request {
	r := c.req.Clone(ctx)
	// The caller's body may fill in the request's Trailer while it is read
	// (see http.Request.Trailer): send the caller's map, which net/http only
	// reads, not a copy taken before those values are set.
	r.Trailer = c.req.Trailer
	if c.n > 1 {
		if r.Header == nil {
			r.Header = make(http.Header, 1)
		}
		r.Header.Set(HeaderAttempt, strconv.Itoa(c.n))
	}
	if c.buffered || c.stream {
		r.GetBody = nil
	}
	if body != nil {
		r.Body = body
	}
	return r
}

// classify turns a transport error into what the retry loop should see.
func (c *call) classify(r *http.Request, err error) error {
	e := &attemptError{method: r.Method, url: r.URL, attempt: c.n, err: err}
	if !c.replayable || !c.idem && !notSent(err) {
		return retry.Permanent(e)
	}
	if c.ctx.Err() != nil || transient(err) || c.t.Policy.Retryable != nil {
		// Context errors: the loop stops on the caller's own context.
		// Policy.Retryable, when set, replaces the rule of transient
		// errors, as it replaces retry.Do's default rule.
		return e
	}
	return retry.Permanent(e)
}
