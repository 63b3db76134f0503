package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
)

// Defaults used where a [Transport] field is zero.
const (
	// DefaultMaxRetryAfter is the longest Retry-After the transport honours
	// by default (Envoy ignores values above 300 s too).
	DefaultMaxRetryAfter = 5 * time.Minute
	// DefaultMaxBufferedBody is the largest request body without GetBody
	// that the transport buffers by default so that it can be replayed.
	DefaultMaxBufferedBody int64 = 1 << 20
	// maxDrain is how much of a retried response's body is read before it
	// is closed, so that its connection can be reused.
	maxDrain = 64 << 10
)

// Transport is an http.RoundTripper that retries requests that failed in a
// way waiting can heal, with the waits and stop rules of Policy. Put it
// under any http.Client, including generated API clients that accept one.
//
// What is retried: responses whose status RetryStatus accepts (by default
// [DefaultRetryStatus]: 408, 429 and 5xx except 501, 505, 511) and transient
// transport errors (connection refused or reset, EOF before a response,
// timeouts of the attempt, HTTP/2 GOAWAY); not bad URLs, unsupported
// schemes, TLS certificate errors, nor the caller's own cancelled context.
//
// Which requests are retried (RFC 9110 9.2.2): GET, HEAD, OPTIONS, TRACE,
// PUT and DELETE always; POST, PATCH and other methods only with an
// Idempotency-Key or X-Idempotency-Key header, with RetryNonIdempotent, when
// the connection could not be dialled (the request provably never left), or
// on a 429 (the server refused it unprocessed). Otherwise a non-idempotent
// request is sent once.
//
// Bodies: a request with GetBody is replayed through GetBody, never copied.
// A body without GetBody is buffered up to MaxBufferedBody bytes before the
// first attempt (if the request's context ends meanwhile, the body is
// closed and the call ends); a larger one is streamed with the first
// attempt that is sent and the request is not retried once sent. Buffering
// waits for the body's end (or MaxBufferedBody+1 bytes): a streaming body
// whose producer waits for the response before it ends, as in full-duplex
// exchanges, must come with GetBody or with a negative MaxBufferedBody.
// If GetBody fails on a retry, the loop stops: the last response is
// returned (or, after a transport error, a *retry.Error that wraps
// GetBody's error).
//
// Every attempt goes through the retry loop of Policy, whether or not it
// may be retried: a Throttle may reject it, a Budget counts it, an
// attempt timeout bounds it and the Observer and Logger see it, exactly
// as in retry.Do. A 429 or 503 counts as a rejection for a Throttle even
// when the request is not retried (a POST without key), and so does an
// attempt that ran out of Policy.AttemptTimeout.
//
// Attempt timeout: Policy.AttemptTimeout bounds each attempt up to the
// arrival of the response headers, and ends no later than Policy.MaxElapsed
// does, as in retry.Do; the body then stays readable until it is closed. The body of a response about to be retried, which the
// transport reads itself (see below), is read within the same bound, so a
// server that stalls it cannot hold the call; without an AttemptTimeout,
// only the request's context bounds that read. An answer that arrives (or
// whose retried body is still being read) once the timer has fired is
// treated as a timed-out attempt (closed and retried), never returned with
// a dead context.
//
// Retry-After (any retried status): the transport waits at least what the
// server asks, plus a jitter of uniform 0..min(1 s, 10% of the wait) so that
// clients given the same HTTP-date do not return in one wave. When the server
// asks for more than MaxRetryAfter (a value too large for a time.Duration
// always counts as more), or more than fits before the context's deadline
// or Policy.MaxElapsed, the server's response is returned at once. No wait
// overflows or goes negative.
//
// Before the wait for a retry, the retried response's body is read (up to
// 64 KiB) and closed, so that its connection serves other requests during
// the wait. If the loop then gives up instead, that response is returned
// with the bytes read as its body. A body longer than 64 KiB (whose
// connection could not be reused anyway) stays open until the loop has
// decided to retry, and is closed then, without reading more, before the
// wait; if GetBody then fails, no response is left to return and RoundTrip
// returns the error. If a Throttle then rejects every attempt left, that
// response is returned, its body giving the bytes read and then an error,
// never a silent io.EOF.
//
// Giving up: on a retryable status the last response is returned (status,
// headers, readable body) with a nil error. On a transport error, the
// error is a *retry.Error wrapping the last error.
//
// What the caller sees on a response: after more than one attempt, the
// response's header carries [HeaderAttempt] set to the number of attempts
// made; when the transport gave up on it, [HeaderExhausted] set to "1".
// [Attempts] and [Exhausted] read them. Being in the header, the marks
// survive body wrappers (http.Client.Timeout) and clients that turn a
// response into an error value keeping its header (googleapi.Error). A
// response obtained at the first attempt and not given up on is returned
// untouched. The
// caller's request is never modified: each retry sends a clone, carrying
// [HeaderAttempt]. The transport owns that header: a first attempt is sent
// without it, even if the caller's request has one. Every clone shares the
// caller's Trailer map (as net/http's own resend does), so that trailer
// values a body sets as it is read are sent.
//
// A Transport inspects responses, which the http.RoundTripper contract
// discourages; that is its purpose. The zero value is usable: it retries
// with the zero retry.Policy over http.DefaultTransport. A Transport is safe
// for concurrent use and should be reused, like http.Transport. Fields must
// not change once it is in use, and a Transport must not be copied after
// first use. A success at the first attempt allocates nothing (with no Hedge, no
// Throttle, Budget, MaxElapsed or AttemptTimeout in the policy; an
// Observer allocates nothing unless it does so itself).
//
// See the package documentation for how this combines with the one resend
// that net/http makes by itself.
type Transport struct {
	// Base sends each attempt. Nil means http.DefaultTransport.
	Base http.RoundTripper

	// Policy gives the waits and the stop rules (attempts, time budget,
	// per-attempt timeout, Budget, Throttle) and the Observer and Logger
	// hooks, which see every attempt sent, as in retry.Do. Its zero value
	// is retry's reference schedule (10 attempts). Errors the hooks see
	// describe method, redacted URL, status or error and attempt; an
	// attempt that ran out of AttemptTimeout reports Timeout() and
	// Overloaded(). Policy.Retryable, when set, is consulted after the
	// transport's own rules, which it cannot widen. An invalid Policy makes
	// every RoundTrip return its Validate error without sending anything.
	Policy retry.Policy

	// RetryStatus reports whether a response status is retried. Nil means
	// [DefaultRetryStatus].
	RetryStatus func(code int) bool

	// RetryNonIdempotent, when true, retries POST, PATCH and other
	// non-idempotent methods as if they were idempotent. Only set it when
	// the server deduplicates requests. False (the default) sends them once
	// unless they carry an idempotency key, the dial failed, or the server
	// answered 429.
	RetryNonIdempotent bool

	// MaxRetryAfter is the longest Retry-After wait honoured; a server that
	// asks for more gets its response returned to the caller at once. Zero
	// means DefaultMaxRetryAfter (5 min); negative means Retry-After
	// headers are ignored and the policy's own waits are used.
	MaxRetryAfter time.Duration

	// MaxBufferedBody is the largest request body without GetBody that is
	// buffered in memory so it can be replayed. Zero means
	// DefaultMaxBufferedBody (1 MiB); negative means such bodies are never
	// buffered and those requests are sent once.
	MaxBufferedBody int64

	// Hedge, when set, hedges requests that are safe to send several
	// times at once: an idempotent method or an idempotency key (never a
	// POST without one, whatever RetryNonIdempotent says), and no body or
	// one replayable through GetBody or the buffer. Once a copy has been
	// outstanding Hedge's delay, another is sent (carrying
	// [HeaderAttempt]); the first response whose status is not retried
	// wins, and the others are cancelled and closed before RoundTrip
	// returns. The winner carries HeaderAttempt set to its own attempt
	// number when it was not the first. Hedges draw on Policy.Budget and
	// go through Policy.Throttle; see retry.Hedge for the rules. Each copy
	// gets its body from the request's GetBody, so GetBody may be called
	// by several copies at once (http.NewRequest's are safe for that).
	// Other requests are retried as without it. Nil means no hedging.
	Hedge *retry.Hedger

	plain atomic.Uint32 // 0 until judgePolicy's verdict on Policy, then plainYes, plainNo or plainObserved
}

// NewClient returns an http.Client whose Transport is a [Transport] with
// policy p over http.DefaultTransport.
func NewClient(p retry.Policy) *http.Client {
	return &http.Client{Transport: &Transport{Policy: p}}
}

// CloseIdleConnections closes the idle connections of Base
// (http.DefaultTransport when Base is nil) if it has a
// CloseIdleConnections method, and does nothing otherwise. It is what
// http.Client.CloseIdleConnections calls on its Transport.
func (t *Transport) CloseIdleConnections() {
	if b, ok := t.base().(interface{ CloseIdleConnections() }); ok {
		b.CloseIdleConnections()
	}
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

func (t *Transport) retryStatus(code int) bool {
	if f := t.RetryStatus; f != nil {
		return f(code)
	}
	return DefaultRetryStatus(code)
}

func (t *Transport) maxRetryAfter() time.Duration {
	if t.MaxRetryAfter == 0 {
		return DefaultMaxRetryAfter
	}
	return t.MaxRetryAfter
}

func (t *Transport) maxBufferedBody() int64 {
	if t.MaxBufferedBody == 0 {
		return DefaultMaxBufferedBody
	}
	return t.MaxBufferedBody
}

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
	replay     bool           // the loop's next call of attempt returns firstResp, firstErr and sends nothing
	buf        []byte         // buffered body or prefix of a streamed one
	n          int            // attempts sent (base.RoundTrip called)
	last       *http.Response // last retryable response, still open or buffered
	firstResp  *http.Response // result of the attempt made before the loop
	firstErr   error
	observer   retry.Observer // the policy's own Observer

	// attempt1Seen: RoundTrip already reported the first attempt to the
	// policy's Observer before the loop took it over.
	attempt1Seen bool
	// pending: the loop's EventAttempt, held back under an AttemptTimeout
	// until tryTimed has the attempt's own context to report it with, as
	// retry.Do reports it (see flushAttempt).
	pending    retry.Event
	hasPending bool
	// start: when the loop started, with a MaxElapsed (see try).
	start time.Time
	// loopN: the number of the loop's current attempt (Event.Attempt of
	// its last EventAttempt or EventThrottled), for mayRetry.
	loopN int
}

// RoundTrip sends req, retrying as described on [Transport].
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if len(req.Header) != 0 {
		if _, ok := req.Header[HeaderAttempt]; ok {
			// The transport owns the header: a first attempt goes without
			// the caller's (a proxy's copy of its inbound request's
			// headers, say), which would tell the server it is a retry.
			orig := req
			req = req.Clone(ctx)
			delete(req.Header, HeaderAttempt)
			// The caller's body may fill in its request's Trailer as it
			// is read (see http.Request.Trailer): every attempt sends
			// that map itself, not a copy taken before the values are set.
			req.Trailer = orig.Trailer
		}
	}
	plain := t.plain.Load()
	if plain == 0 {
		plain = t.judgePolicy()
	}
	if plain != plainNo && (req.Body == nil || req.Body == http.NoBody || req.GetBody != nil) && ctx.Err() == nil {
		// The first attempt is made here, exactly as the loop would make
		// it (the policy is plain: nothing to account, no clock to read,
		// no context to make; an Observer gets the loop's two events),
		// with no state on the heap: a success costs no allocation.
		// Anything else continues in the loop, which takes this attempt's
		// outcome as its own first attempt.
		obs, maxAttempts := t.Policy.Observer, t.Policy.MaxAttempts // obs is set only when plain == plainObserved
		if plain == plainObserved {
			if maxAttempts == 0 {
				maxAttempts = retry.DefaultMaxAttempts
			}
			obs.Observe(ctx, retry.Event{Kind: retry.EventAttempt, Attempt: 1, MaxAttempts: maxAttempts})
		}
		base := t.base()
		resp, err := base.RoundTrip(req)
		if err == nil && resp != nil {
			// t.retryStatus, inlined by hand.
			if f := t.RetryStatus; f == nil && !DefaultRetryStatus(resp.StatusCode) || f != nil && !f(resp.StatusCode) {
				if plain == plainObserved {
					obs.Observe(ctx, retry.Event{Kind: retry.EventDone, Attempt: 1, MaxAttempts: maxAttempts})
				}
				return resp, nil
			}
		}
		c := t.newCall(req, ctx, base)
		c.n, c.bodyUsed = 1, req.Body != nil
		c.attempt1Seen = plain == plainObserved
		if err == nil && resp == nil {
			err = errNilResponse
		}
		if err != nil {
			resp, err = nil, c.classify(req, err)
		} else {
			resp, err = c.judge(req, resp)
		}
		c.replay, c.firstResp, c.firstErr = true, resp, err
		return c.loop(&replayCtx{Context: ctx, c: c})
	}
	c := t.newCall(req, ctx, t.base())
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		if !c.bufferBody() {
			// Too large to replay: sent once, through the loop all the
			// same (Throttle, Budget, AttemptTimeout, hooks), never
			// retried once sent.
			c.stream, c.replayable = true, false
		}
	}
	if t.Hedge != nil && c.replayable && hedgeable(req) {
		return c.hedged()
	}
	return c.loop(ctx)
}

func (t *Transport) newCall(req *http.Request, ctx context.Context, base http.RoundTripper) *call {
	return &call{t: t, req: req, ctx: ctx, base: base, replayable: true,
		idem: t.RetryNonIdempotent || idempotent(req.Method) || hasIdempotencyKey(req.Header)}
}

// Values of Transport.plain.
const (
	plainYes      = 1 + iota
	plainNo       // the loop makes every attempt
	plainObserved // plain but for an Observer, which RoundTrip calls itself
)

// judgePolicy decides whether RoundTrip may make the first attempt itself
// before handing over to retry.DoValue: the policy is valid and plain, so
// that the loop would do nothing around that attempt but call it (no
// Throttle, Budget, time budget or attempt timeout) and report it to the
// Observer, if there is one (plainObserved). The verdict
// is reached once per Transport, whose fields do not change once it is in
// use, and stored in t.plain.
func (t *Transport) judgePolicy() uint32 {
	p := &t.Policy
	v := uint32(plainNo)
	if p.Throttle == nil && p.Budget == nil && p.MaxElapsed <= 0 && p.AttemptTimeout <= 0 && t.Hedge == nil && p.Validate() == nil {
		v = plainYes
		if p.Observer != nil {
			v = plainObserved
		}
	}
	t.plain.Store(v)
	return v
}

// loop runs the retry loop of c and turns its outcome into RoundTrip's.
func (c *call) loop(ctx context.Context) (*http.Response, error) {
	// The attempt timeout is applied by attempt rather than by retry.Do,
	// whose per-attempt context would end before the caller reads the body.
	p := c.t.Policy
	p.AttemptTimeout = 0
	if p.MaxElapsed > 0 {
		c.start = time.Now() // for the attempt timeout, which try applies
	}
	// The call watches the loop's events (passing them on to the policy's
	// Observer) to release a response that release had to leave open as
	// soon as the loop has decided to retry it.
	c.observer, p.Observer = p.Observer, c
	resp, err := retry.DoValue(ctx, p, c.attempt)
	if err == nil {
		return c.mark(resp, false), nil
	}
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

// Observe passes e on to the policy's own Observer and, when the loop is
// about to wait before a retry, closes the body of the previous response if
// release left it open (a body longer than maxDrain), so that its
// connection is freed before the wait; the response stays the last answer
// (a Throttle may still reject every attempt left), with a body that ends
// in errReleased.
func (c *call) Observe(ctx context.Context, e retry.Event) {
	if e.Kind == retry.EventAttempt || e.Kind == retry.EventThrottled {
		c.loopN = e.Attempt
	}
	if c.attempt1Seen && e.Kind == retry.EventAttempt && e.Attempt == 1 {
		c.attempt1Seen = false // reported once already, by RoundTrip
	} else if e.Kind == retry.EventAttempt && c.observer != nil && c.t.Policy.AttemptTimeout > 0 {
		c.pending, c.hasPending = e, true // reported by try with the attempt's context
	} else if c.observer != nil {
		c.observer.Observe(ctx, e)
	}
	if e.Kind == retry.EventRetry && c.last != nil && c.last.Body != nil && c.last.Body != http.NoBody {
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

// errReleased ends the body of a response returned after its unread rest
// was closed before the wait for a retry that was then not sent.
var errReleased = errors.New("retryhttp: the rest of this response's body was discarded before the wait for a retry that was not sent")

// released reports whether resp is a response whose body Observe closed
// before the wait for a retry.
func released(resp *http.Response) bool {
	rb, ok := resp.Body.(*readBody)
	return ok && rb.err == errReleased
}

// replayCtx is the caller's context as the retry loop sees it when
// RoundTrip made the first attempt before the loop started. Until the loop
// has taken that attempt's result, Err reports nil, so that the loop
// records the attempt before it looks at the context, as it does for an
// attempt it makes itself; everything else is the caller's context.
type replayCtx struct {
	context.Context
	c *call
}

func (x *replayCtx) Err() error {
	if x.c.replay {
		return nil
	}
	return x.Context.Err()
}

// bufferBody reads the caller's body (no GetBody) up to the limit. It
// reports false when the body is larger; c.buf then holds the prefix read.
// If the request's context ends during the read, the body is closed, as
// http.Transport closes the body it is sending, so that a read blocked on
// a producer (a pipe) returns; the loop then sees the context's end.
func (c *call) bufferBody() bool {
	limit := c.t.maxBufferedBody()
	if limit < 0 {
		return false
	}
	stop := context.AfterFunc(c.ctx, func() { c.req.Body.Close() })
	b, err := io.ReadAll(io.LimitReader(c.req.Body, limit+1))
	closed := !stop() // the AfterFunc closed the body, or is closing it: it owns the Close
	if closed {
		c.bodyUsed = true
	}
	c.buf = b
	if err != nil || int64(len(b)) > limit {
		return false
	}
	if !closed {
		c.req.Body.Close()
	}
	c.bodyUsed = true
	c.buffered = true
	return true
}

// attempt is the operation handed to retry.DoValue. It ignores the loop's
// context, which is the request's (possibly seen through a replayCtx).
func (c *call) attempt(context.Context) (*http.Response, error) {
	if c.replay {
		c.replay = false
		resp, err := c.firstResp, c.firstErr
		c.firstResp, c.firstErr = nil, nil
		return resp, err
	}
	return c.try()
}

// try sends one attempt and judges its outcome.
func (c *call) try() (*http.Response, error) {
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
			c.flushAttempt(c.ctx)
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
	if d := c.t.Policy.AttemptTimeout; d > 0 {
		if me := c.t.Policy.MaxElapsed; me > 0 {
			// As in retry.Do, the attempt ends where the time budget does.
			d = min(d, max(me-time.Since(c.start), 1))
		}
		return c.tryTimed(d, body)
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
	return c.judge(r, resp)
}

// flushAttempt reports the loop's held-back EventAttempt, if any, to the
// policy's Observer with ctx: the attempt's own context under an
// AttemptTimeout, which its timeout ends, as in retry.Do.
func (c *call) flushAttempt(ctx context.Context) {
	if c.hasPending {
		c.hasPending = false
		c.observer.Observe(ctx, c.pending)
	}
}

// attemptView is the context of an attempt under an AttemptTimeout as the
// Observer sees it, as retry.Do's would be: with the attempt's deadline,
// and DeadlineExceeded once the timer has ended the attempt. The request
// itself runs on the plain context, which only the claim of the timer
// ends (see tryTimed).
type attemptView struct {
	context.Context
	deadline time.Time
	state    *atomic.Uint32
}

func (a *attemptView) Deadline() (time.Time, bool) {
	if d, ok := a.Context.Deadline(); ok && d.Before(a.deadline) {
		return d, true
	}
	return a.deadline, true
}

func (a *attemptView) Err() error {
	err := a.Context.Err()
	if err != nil && a.state.Load() == attemptTimedOut {
		return context.DeadlineExceeded
	}
	return err
}

// errNilResponse stands for the answer of a Base that broke the
// http.RoundTripper contract by returning neither a response nor an error.
var errNilResponse = errors.New("retryhttp: Base returned a nil *http.Response and a nil error")

// tryTimed sends one attempt bounded by the policy's AttemptTimeout d,
// which ends once the response headers have arrived and been judged: the
// body of a response handed out stays readable until it is closed, but the
// body of a retried response, which judge drains itself (see release), is
// read under the timer, so that a server stalling it cannot hold the call.
// Whether the attempt made it in time is decided once, by whichever claims
// the attempt first, the timer (which then cancels the attempt's context)
// or the goroutine holding Base's answer, so a response racing the timer
// is either returned with a live context or treated as timed out, never
// both.
func (c *call) tryTimed(d time.Duration, body io.ReadCloser) (*http.Response, error) {
	ctx, cancel := context.WithCancel(c.ctx)
	var state atomic.Uint32 // attemptRunning, then attemptTimedOut or attemptAnswered
	timer := time.AfterFunc(d, func() {
		if state.CompareAndSwap(attemptRunning, attemptTimedOut) {
			cancel()
		}
	})
	handedOut := false
	defer func() {
		// On every path but a response handed out (whose body's Close
		// cancels), including a panic in Base: stop the timer and end the
		// attempt's context, so that it does not stay registered on the
		// caller's.
		if !handedOut {
			timer.Stop()
			cancel()
		}
	}()
	if c.hasPending {
		c.flushAttempt(&attemptView{Context: ctx, deadline: time.Now().Add(d), state: &state})
	}
	r := c.prepare(ctx, body)
	resp, err := c.base.RoundTrip(r)
	if err == nil && resp == nil {
		err = errNilResponse
	}
	if err != nil {
		resp = nil // a Base that returned both breaks the contract
	}
	var serr error // judge's verdict on resp
	if err == nil {
		wrapped := resp.Body != nil && resp.Body != http.NoBody
		if wrapped {
			resp.Body = newCancelBody(resp.Body, cancel)
		}
		// judge may drain the body of a response to retry: still under the
		// timer. RetryStatus may panic: the deferred cancel runs then.
		resp, serr = c.judge(r, resp)
		handedOut = wrapped
	}
	timer.Stop()
	if !state.CompareAndSwap(attemptRunning, attemptAnswered) {
		// The timer claimed the attempt first and cancelled its context:
		// it timed out, whatever Base returned or judge made of it.
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		resp, c.last, c.exhaust, handedOut = nil, nil, false, false
		if c.ctx.Err() != nil {
			// The caller's context ended too: that is what the loop sees.
			if err == nil {
				err = c.ctx.Err()
			}
			return nil, c.classify(r, err)
		}
		return nil, c.classify(r, &attemptTimeoutError{d, err})
	}
	if err != nil {
		return nil, c.classify(r, err)
	}
	// With no body to read, handedOut is false: the attempt's context ends
	// now. Otherwise closing the body ends it (a drained body is closed).
	return resp, serr
}

// States of an attempt under an attempt timeout (see tryTimed).
const (
	attemptRunning uint32 = iota
	attemptTimedOut
	attemptAnswered
)

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
	var err error = e
	if max := c.t.maxRetryAfter(); max > 0 {
		if v := resp.Header.Get("Retry-After"); v != "" {
			if d, ok := ParseRetryAfter(v, time.Now()); ok {
				if (d > max || d == maxDuration) && c.mayRetry() {
					// The server asks for more than we honour (or than a
					// Duration holds): give its answer to the caller now.
					// At the last attempt the attempt limit ends the
					// loop anyway, and is what it reports.
					return resp, retry.Permanent(e)
				}
				err = retry.After(e, satAdd(d, retryAfterJitter(d)))
			}
		}
	}
	if c.mayRetry() {
		release(resp)
	}
	return resp, err
}

// mayRetry reports whether the policy's attempt limit leaves room for
// another attempt after the current one: the loop's attempts, those a
// Throttle rejected included (loopN), or the c.n sent if more. Other stop
// rules may still end the loop.
func (c *call) mayRetry() bool {
	m := c.t.Policy.MaxAttempts
	if m == 0 {
		m = retry.DefaultMaxAttempts
	}
	return m == retry.Unlimited || max(c.n, c.loopN) < m
}

// retryAfterJitter returns a uniform random 0..min(1 s, d/10).
func retryAfterJitter(d time.Duration) time.Duration {
	j := min(time.Second, d/10)
	if j <= 0 {
		return 0
	}
	return rand.N(j + 1)
}

// satAdd returns a + b for non-negative a and b, saturating at maxDuration.
func satAdd(a, b time.Duration) time.Duration {
	if a > maxDuration-b {
		return maxDuration
	}
	return a + b
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

// streamBody returns the buffered prefix followed by the rest of the
// caller's body, closing the caller's body when closed.
func (c *call) streamBody() io.ReadCloser {
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(c.buf), c.req.Body), c.req.Body}
}

// classify turns a transport error into what the retry loop should see.
func (c *call) classify(r *http.Request, err error) error {
	e := &attemptError{method: r.Method, url: r.URL, attempt: c.n, err: err}
	if !c.replayable || !c.idem && !notSent(err) {
		return retry.Permanent(e)
	}
	if c.ctx.Err() != nil || transient(err) {
		// Context errors: the loop stops on the caller's own context.
		return e
	}
	return retry.Permanent(e)
}

// getBodyError is the error of a retry whose request body could not be
// made again by the request's GetBody.
type getBodyError struct{ err error }

func (e *getBodyError) Error() string { return "retryhttp: GetBody: " + e.err.Error() }
func (e *getBodyError) Unwrap() error { return e.err }

// attemptTimeoutError is the error of an attempt cut short by
// Policy.AttemptTimeout. It is a timeout, not a context error, so the loop
// retries it, and it reports Overloaded, so that a Throttle counts it as a
// rejection, as retry.Do counts an attempt that ran out of its timeout.
type attemptTimeoutError struct {
	d   time.Duration
	err error // what Base returned, if anything
}

func (e *attemptTimeoutError) Error() string {
	return "retryhttp: attempt timed out after " + e.d.String()
}
func (e *attemptTimeoutError) Timeout() bool    { return true }
func (e *attemptTimeoutError) Temporary() bool  { return true }
func (e *attemptTimeoutError) Overloaded() bool { return true }

// newCancelBody returns body wrapped so that closing it ends the attempt's
// context. The wrapper keeps the body's capabilities: the body of a 101
// Switching Protocols response is an io.ReadWriteCloser, and so is its
// wrapper.
func newCancelBody(body io.ReadCloser, cancel context.CancelFunc) io.ReadCloser {
	if rw, ok := body.(io.ReadWriteCloser); ok {
		return &cancelRWBody{rw, cancel}
	}
	return &cancelBody{body, cancel}
}

// cancelBody ends an attempt's context when the body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// cancelRWBody is cancelBody for a writable body.
type cancelRWBody struct {
	io.ReadWriteCloser
	cancel context.CancelFunc
}

func (b *cancelRWBody) Close() error {
	err := b.ReadWriteCloser.Close()
	b.cancel()
	return err
}

// release frees the connection of a response the loop will probably
// retry, before the wait: it reads the rest of the body, up to maxDrain
// bytes, closes it, and leaves what it read in resp.Body, so that the
// response can still be returned whole if the loop gives up instead. A
// body longer than that cannot leave its connection reusable anyway; it
// stays open (its prefix read) until the loop decides: call.Observe
// closes it when the loop is about to wait for a retry.
func release(resp *http.Response) {
	if resp.Body == nil || resp.Body == http.NoBody || resp.ContentLength > maxDrain {
		return
	}
	var buf bytes.Buffer
	_, err := buf.ReadFrom(io.LimitReader(resp.Body, maxDrain+1))
	if err == nil && buf.Len() > maxDrain {
		resp.Body = &prefixBody{bytes.NewReader(buf.Bytes()), resp.Body}
		return
	}
	resp.Body.Close()
	resp.Body = &readBody{r: bytes.NewReader(buf.Bytes()), err: err}
}

// readBody is a body read in full by release: its bytes, then the error
// that ended the read (io.EOF when the body was complete).
type readBody struct {
	r   *bytes.Reader
	err error
}

func (b *readBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF && b.err != nil {
		err = b.err
	}
	return n, err
}

func (b *readBody) Close() error { return nil }

// prefixBody is a body whose first bytes release has read.
type prefixBody struct {
	prefix *bytes.Reader
	rest   io.ReadCloser
}

func (b *prefixBody) Read(p []byte) (int, error) {
	if b.prefix.Len() > 0 {
		return b.prefix.Read(p)
	}
	return b.rest.Read(p)
}

func (b *prefixBody) Close() error { return b.rest.Close() }

// discard drains a bounded prefix of resp's body and closes it.
func discard(resp *http.Response) {
	if resp.Body == nil {
		return
	}
	io.CopyN(io.Discard, resp.Body, maxDrain)
	resp.Body.Close()
}

// statusError is the error of an attempt that got a retryable status.
type statusError struct {
	resp    *http.Response
	method  string
	url     *url.URL
	attempt int
}

func (e *statusError) Error() string {
	return "retryhttp: " + e.method + " " + redact(e.url) + ": " + e.resp.Status + " (attempt " + strconv.Itoa(e.attempt) + ")"
}

// Overloaded reports whether the server said it is overloaded (429 or 503),
// which is what retry.Throttle counts as a rejection by default.
func (e *statusError) Overloaded() bool {
	return e.resp.StatusCode == http.StatusTooManyRequests || e.resp.StatusCode == http.StatusServiceUnavailable
}

// StatusCode returns the response's status code.
func (e *statusError) StatusCode() int { return e.resp.StatusCode }

// exhaustedError is the error of a response that a lower retry layer
// marked Retry-Exhausted: not retried, reported as an inner loop's.
type exhaustedError struct{ *statusError }

func (e exhaustedError) Unwrap() error   { return e.statusError }
func (e exhaustedError) Exhausted() bool { return true }

// attemptError is the error of an attempt that got no response.
type attemptError struct {
	method  string
	url     *url.URL
	attempt int
	err     error
}

func (e *attemptError) Error() string {
	msg := e.err.Error()
	var ue *url.Error
	if errors.As(e.err, &ue) {
		msg = ue.Err.Error() // its URL may hold secrets
	}
	return "retryhttp: " + e.method + " " + redact(e.url) + ": " + msg + " (attempt " + strconv.Itoa(e.attempt) + ")"
}

func (e *attemptError) Unwrap() error { return e.err }

// redact returns u without a password and with every query value
// replaced by "xxx".
func redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	v := *u
	if v.User != nil {
		if _, has := v.User.Password(); has {
			v.User = url.UserPassword(v.User.Username(), "xxxxx")
		}
	}
	if v.RawQuery != "" {
		parts := strings.Split(v.RawQuery, "&")
		for i, p := range parts {
			if k, _, ok := strings.Cut(p, "="); ok {
				parts[i] = k + "=xxx"
			}
		}
		v.RawQuery = strings.Join(parts, "&")
	}
	v.Fragment, v.RawFragment = "", ""
	return v.String()
}
