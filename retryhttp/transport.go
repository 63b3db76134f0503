package retryhttp

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
)

// Defaults used where a [Transport] field is zero.
const (
	// DefaultMaxServerWait is the longest Retry-After the transport honours
	// by default (Envoy ignores values above 300 s too).
	DefaultMaxServerWait = 5 * time.Minute
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
// a dead context. As in retry.Do, an attempt that ran out of its timeout
// while the request's context was alive is retried whatever
// Policy.Retryable says (unless it cannot be sent again), and counts as a
// rejection for a Throttle. A Pacer's hold comes before the attempt and
// its timeout.
//
// Server hints (any retried status): the transport waits at least what the
// server asks, read from the first valid hint in the order [ParseHint]
// gives (Retry-After, retry-after-ms, x-ms-retry-after-ms, RateLimit,
// X-RateLimit-Reset, the per-dimension resets), plus a jitter of uniform
// 0..min(1 s, 10% of the wait) so that clients given the same time do not
// return in one wave. When the server asks for more than MaxServerWait (a
// value too large for a time.Duration always counts as more), or more than
// fits before the context's deadline or Policy.MaxElapsed, the server's
// response is returned at once. No wait overflows or goes negative.
// [WaitHint] tells an Observer which hint set a wait.
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
	// Overloaded(). Policy.Retryable, when set, judges every error the
	// loop sees, as in retry.Do: it replaces the rule of which transport
	// errors are transient, and may refuse a status that RetryStatus
	// retries (a status RetryStatus does not retry is an answer, not an
	// error); what cannot be sent again safely (idempotency, the body) is
	// never retried. An invalid Policy makes
	// every RoundTrip return the error of [Transport.Validate] without
	// sending anything; [NewClient] refuses it.
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

	// MaxServerWait is the longest server wait honoured, whichever hint
	// asks for it (Retry-After, retry-after-ms, RateLimit and the others
	// that [ParseHint] reads); a server that asks for more gets its
	// response returned to the caller at once, and a Pacer keeps no hold
	// longer than this. Zero means DefaultMaxServerWait (5 min); negative
	// means server hints are ignored (the policy's own waits are used,
	// and a Pacer holds nothing).
	MaxServerWait time.Duration

	// MaxBufferedBody is the largest request body without GetBody that is
	// buffered in memory so it can be replayed. Zero means
	// DefaultMaxBufferedBody (1 MiB); negative means such bodies are never
	// buffered and those requests are sent once.
	MaxBufferedBody int64

	// Hedge, when set, hedges requests that are safe to send several
	// times at once: an idempotent method, a non-empty idempotency key, or
	// net/http's mark of an idempotent request (the key present with a nil
	// value, which is not sent); never a POST without one of these,
	// whatever RetryNonIdempotent says. Also no Trailer (a body may fill
	// it in as it is read; such a request is retried one copy at a time),
	// and no body or one replayable through GetBody or the buffer. Once a copy has been outstanding Hedge's
	// delay, another is sent (carrying [HeaderAttempt]); the first
	// response whose status is not retried wins, and the others are
	// cancelled and closed, unread, before RoundTrip returns. A hedge whose
	// GetBody fails is not sent and stops the burst's hedges while another
	// copy is in flight. The winner carries HeaderAttempt set to its own attempt
	// number when it was not the first. Hedges draw on Policy.Budget and
	// go through Policy.Throttle; see retry.Hedge for the rules. Each copy
	// gets its body from the request's GetBody, so GetBody may be called
	// by several copies at once (http.NewRequest's are safe for that).
	// Other requests are retried as without it. Nil, the field unset,
	// means no hedging, as a nil Policy.Budget means no Budget;
	// &retry.Hedger{} hedges with the defaults (docs/hedging.md).
	Hedge *retry.Hedger

	// Pace, when set, holds requests to a host whose server said that
	// their quota is spent (RateLimit r=0, or a remaining of 0 with its
	// reset, on any response) until the quota resets, instead of sending
	// them to be refused; see [Pacer]. Each hold is reported to
	// Policy.Observer as a retry.EventHeld. Nil (the default) means no
	// pacing.
	Pace *Pacer

	plain atomic.Uint32 // 0 until judgePolicy's verdict on Policy, then plainYes, plainNo or plainObserved
}

// NewClient returns an http.Client whose Transport is a [Transport] with
// policy p over http.DefaultTransport. An invalid p is refused here: the
// error starts with "retryhttp: " and wraps the one of p.Validate
// (errors.Is(err, retry.ErrInvalidPolicy) holds), and the client is nil.
func NewClient(p retry.Policy) (*http.Client, error) {
	t := &Transport{Policy: p}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return &http.Client{Transport: t}, nil
}

// Validate makes the checks that RoundTrip makes of t before it sends
// anything, for a Transport built as a struct literal: nil when t is
// usable, as the zero Transport is; otherwise the error that every
// RoundTrip would return, which starts with "retryhttp: " and wraps the
// one of Policy.Validate (errors.Is(err, retry.ErrInvalidPolicy) holds).
// [NewClient] calls it.
func (t *Transport) Validate() error {
	if err := t.Policy.Validate(); err != nil {
		return fmt.Errorf("retryhttp: %w", err)
	}
	return nil
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

func (t *Transport) maxServerWait() time.Duration {
	if t.MaxServerWait == 0 {
		return DefaultMaxServerWait
	}
	return t.MaxServerWait
}

func (t *Transport) maxBufferedBody() int64 {
	if t.MaxBufferedBody == 0 {
		return DefaultMaxBufferedBody
	}
	return t.MaxBufferedBody
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
	if plain == plainInvalid {
		if req.Body != nil {
			req.Body.Close() // as the RoundTripper contract asks, even on error
		}
		return nil, t.Validate()
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
		var resp *http.Response
		var err error
		sent := true
		if t.Pace != nil {
			err = t.pace(ctx, req, 1, time.Time{})
			sent = err == nil
		}
		if sent {
			resp, err = base.RoundTrip(req)
			if t.Pace != nil && err == nil {
				t.learn(req, resp)
			}
		}
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
		if err == nil && resp == nil {
			err = errNilResponse
		}
		if !sent {
			c.n, c.bodyUsed = 0, false
			err = c.held(err)
		} else if err != nil {
			resp, err = nil, c.classify(req, err)
		} else {
			resp, err = c.judge(req, resp)
		}
		c.replay, c.firstResp, c.firstErr = true, resp, err
		return c.loop()
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
	return c.loop()
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
	plainInvalid  // the policy is invalid: RoundTrip returns t.Validate()
)

// judgePolicy decides whether RoundTrip may make the first attempt itself
// before handing over to the loop (call.loop): the policy is valid and plain, so
// that the loop would do nothing around that attempt but call it (no
// Throttle, Budget, time budget or attempt timeout) and report it to the
// Observer, if there is one (plainObserved); or that it is invalid
// (plainInvalid). The verdict
// is reached once per Transport, whose fields do not change once it is in
// use, and stored in t.plain.
func (t *Transport) judgePolicy() uint32 {
	p := &t.Policy
	v := uint32(plainNo)
	if p.Validate() != nil {
		v = plainInvalid
	} else if p.Throttle == nil && p.Budget == nil && p.MaxElapsed <= 0 && p.AttemptTimeout <= 0 && t.Hedge == nil {
		v = plainYes
		if p.Observer != nil {
			v = plainObserved
		}
	}
	t.plain.Store(v)
	return v
}
