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
// A body without GetBody is buffered up to MaxBufferedBody bytes; a larger
// one is streamed once and the request is not retried.
//
// Retry-After (any retried status): the transport waits at least what the
// server asks, plus a jitter of uniform 0..min(1 s, 10% of the wait) so that
// clients given the same HTTP-date do not return in one wave. When the server
// asks for more than MaxRetryAfter, or more than fits before the context's
// deadline or Policy.MaxElapsed, the server's response is returned at once.
//
// Giving up: on a retryable status the last response is returned as is
// (status, headers, readable body) with a nil error; [Attempts] tells how
// many attempts produced it. On a transport error, the error is a
// *retry.Error wrapping the last error. The body of every response that is
// retried is drained (up to 64 KiB) and closed, so its connection is reused.
// The caller's request is never modified: each retry sends a clone, carrying
// [HeaderAttempt].
//
// A Transport inspects responses, which the http.RoundTripper contract
// discourages; that is its purpose. The zero value is usable: it retries
// with the zero retry.Policy over http.DefaultTransport. A Transport is safe
// for concurrent use and should be reused, like http.Transport. Fields must
// not change once it is in use.
//
// See the package documentation for how this combines with the one resend
// that net/http makes by itself.
type Transport struct {
	// Base sends each attempt. Nil means http.DefaultTransport.
	Base http.RoundTripper

	// Policy gives the waits and the stop rules (attempts, time budget,
	// per-attempt timeout, Budget, Throttle) and the Observer and Logger
	// hooks. Its zero value is retry's reference schedule (10 attempts).
	// Errors the hooks see describe method, redacted URL, status or error
	// and attempt. Policy.Retryable, when set, is consulted after the
	// transport's own rules, which it cannot widen.
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
}

// NewClient returns an http.Client whose Transport is a [Transport] with
// policy p over http.DefaultTransport.
func NewClient(p retry.Policy) *http.Client {
	return &http.Client{Transport: &Transport{Policy: p}}
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

func (t *Transport) retryStatus(code int) bool {
	if t.RetryStatus != nil {
		return t.RetryStatus(code)
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
	t        *Transport
	req      *http.Request
	base     http.RoundTripper
	canRetry bool   // method idempotent, key present or RetryNonIdempotent
	buf      []byte // buffered body when the request has no GetBody
	buffered bool
	n        int            // attempts made
	last     *http.Response // last response, still open
	sent     bool           // the caller's request (and body) was handed to base
	exhaust  bool           // the last response says "already retried below"

	attemptTimeout time.Duration
}

// RoundTrip sends req, retrying as described on [Transport].
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := call{t: t, req: req, base: t.base()}
	c.canRetry = t.RetryNonIdempotent || idempotent(req.Method) || hasIdempotencyKey(req.Header)
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		if !c.bufferBody() {
			// Too large to replay: stream once, no retries.
			r2 := req.Clone(req.Context())
			r2.Body = c.streamBody()
			return c.base.RoundTrip(r2)
		}
	}
	ctx := req.Context()
	// The attempt timeout is applied here rather than by retry.Do, whose
	// per-attempt context would end before the caller reads the body.
	p := t.Policy
	c.attemptTimeout, p.AttemptTimeout = p.AttemptTimeout, 0
	resp, err := retry.DoValue(ctx, p, c.attempt)
	if err == nil {
		return c.mark(resp, false), nil
	}
	if !c.sent && req.Body != nil {
		req.Body.Close()
	}
	var re *retry.Error
	errors.As(err, &re)
	if c.last != nil && (re == nil || re.Reason != retry.ReasonContext) {
		// Gave up after a retryable status (perhaps followed by attempts a
		// Throttle rejected): hand back the server's last answer.
		exhausted := c.n > 1 || c.exhaust || re != nil && re.Reason != retry.ReasonPermanent
		if exhausted {
			markTracker(ctx)
		}
		return c.mark(c.last, exhausted), nil
	}
	if c.last != nil {
		discard(c.last)
		c.last = nil
	}
	if re != nil && re.Reason != retry.ReasonPermanent && re.Reason != retry.ReasonContext {
		markTracker(ctx)
	}
	return nil, err
}

// bufferBody reads the caller's body (no GetBody) up to the limit. It
// reports false when the body is larger; c.buf then holds the prefix read.
func (c *call) bufferBody() bool {
	limit := c.t.maxBufferedBody()
	if limit < 0 {
		return false
	}
	b, err := io.ReadAll(io.LimitReader(c.req.Body, limit+1))
	c.buf = b
	if err != nil || int64(len(b)) > limit {
		return false
	}
	c.req.Body.Close()
	c.buffered = true
	return true
}

// streamBody returns the buffered prefix followed by the rest of the
// caller's body, closing the caller's body when closed.
func (c *call) streamBody() io.ReadCloser {
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(c.buf), c.req.Body), c.req.Body}
}

// attempt is the operation handed to retry.DoValue.
func (c *call) attempt(ctx context.Context) (*http.Response, error) {
	if c.last != nil {
		// A retry is happening: release the previous response.
		discard(c.last)
		c.last = nil
	}
	c.n++
	var cancel context.CancelFunc
	var timedOut atomic.Bool
	if c.attemptTimeout > 0 {
		var actx context.Context
		actx, cancel = context.WithCancel(ctx)
		timer := time.AfterFunc(c.attemptTimeout, func() { timedOut.Store(true); cancel() })
		defer timer.Stop()
		ctx = actx
	}
	r := c.req
	if c.n > 1 || c.buffered || ctx != c.req.Context() {
		var err error
		if r, err = c.prepare(ctx); err != nil {
			return nil, retry.Permanent(err)
		}
	} else {
		c.sent = true
	}
	resp, err := c.base.RoundTrip(r)
	if cancel != nil {
		if err != nil {
			cancel()
			if timedOut.Load() && c.req.Context().Err() == nil {
				err = &attemptTimeoutError{c.attemptTimeout, err}
				ctx = c.req.Context()
			}
		} else {
			// The body stays readable until it is closed.
			resp.Body = &cancelBody{resp.Body, cancel}
		}
	}
	if err != nil {
		return nil, c.classify(ctx, r, err)
	}
	if !c.t.retryStatus(resp.StatusCode) {
		return resp, nil
	}
	if ex := resp.Header.Get(HeaderExhausted); ex != "" || isMarkedExhausted(resp) {
		// Already retried to exhaustion below: do not retry again.
		c.exhaust = true
		c.last = resp
		return resp, retry.Permanent(&statusError{resp: resp, method: r.Method, url: r.URL, attempt: c.n})
	}
	if !c.canRetry && resp.StatusCode != http.StatusTooManyRequests {
		return resp, nil
	}
	c.last = resp
	var e error = &statusError{resp: resp, method: r.Method, url: r.URL, attempt: c.n}
	if max := c.t.maxRetryAfter(); max > 0 {
		if v := resp.Header.Get("Retry-After"); v != "" {
			if d, ok := ParseRetryAfter(v, time.Now()); ok {
				if d > max {
					// The server asks for more than we honour: give its
					// answer to the caller now.
					return resp, retry.Permanent(e)
				}
				e = retry.After(e, d+retryAfterJitter(d))
			}
		}
	}
	return resp, e
}

// retryAfterJitter returns a uniform random 0..min(1 s, d/10).
func retryAfterJitter(d time.Duration) time.Duration {
	j := min(time.Second, d/10)
	if j <= 0 {
		return 0
	}
	return rand.N(j + 1)
}

// prepare makes the request for a retry (or a first attempt with its own
// context or buffered body): a clone with a fresh body.
func (c *call) prepare(ctx context.Context) (*http.Request, error) {
	r := c.req.Clone(ctx)
	if c.n > 1 {
		r.Header.Set(HeaderAttempt, strconv.Itoa(c.n))
	}
	switch {
	case c.buffered:
		if len(c.buf) == 0 {
			r.Body = http.NoBody
		} else {
			r.Body = io.NopCloser(bytes.NewReader(c.buf))
		}
		r.GetBody = nil
	case c.req.Body == nil || c.req.Body == http.NoBody:
	case c.n == 1:
		c.sent = true // the caller's body goes with the clone
	default:
		b, err := c.req.GetBody()
		if err != nil {
			return nil, errors.New("retryhttp: GetBody: " + err.Error())
		}
		r.Body = b
	}
	return r, nil
}

// classify turns a transport error into what the retry loop should see.
func (c *call) classify(ctx context.Context, r *http.Request, err error) error {
	e := &attemptError{method: r.Method, url: r.URL, attempt: c.n, err: err}
	if !c.canRetry && !notSent(err) {
		return retry.Permanent(e)
	}
	if ctx.Err() != nil || transient(err) {
		// Context errors: the loop retries an attempt timeout and stops on
		// the caller's own context.
		return e
	}
	return retry.Permanent(e)
}

// attemptTimeoutError is the error of an attempt cut short by
// Policy.AttemptTimeout. It is a timeout, not a context error, so the loop
// retries it.
type attemptTimeoutError struct {
	d   time.Duration
	err error
}

func (e *attemptTimeoutError) Error() string {
	return "retryhttp: attempt timed out after " + e.d.String()
}
func (e *attemptTimeoutError) Timeout() bool   { return true }
func (e *attemptTimeoutError) Temporary() bool { return true }

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

// discard drains a bounded prefix of resp's body and closes it.
func discard(resp *http.Response) {
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
