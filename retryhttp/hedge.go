package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/retrykit/retry"
)

// hedgeable reports whether req may be sent as several copies at once: an
// idempotent method or an idempotency key (RetryNonIdempotent does not
// widen this: a POST without a key is never hedged), no trailers, and a
// body that can be replayed (checked by the caller). A body may set the
// request's trailer values as it is read (see http.Request.Trailer), into
// the one map that every copy sends: copies at once would write and read
// it together. Such a request is retried one copy at a time.
func hedgeable(req *http.Request) bool {
	return len(req.Trailer) == 0 && (idempotent(req.Method) || hasIdempotencyKey(req.Header))
}

// hedgeState is what the copies of one hedged RoundTrip share: the
// successful responses, so that those of copies that lost are closed.
type hedgeState struct {
	mu  sync.Mutex
	won []*http.Response // every copy's successful response
	// live counts the copies sending, or done with a success (which
	// wins unless another did): the copies that may still win.
	live int
}

// hedged runs c's request through retry.HedgeValue with the Transport's
// Hedger: each copy is a clone of the request with its own context, body
// (GetBody or the buffer) and attempt header.
func (c *call) hedged() (*http.Response, error) {
	var hs hedgeState
	resp, err := retry.HedgeValue(c.ctx, c.t.Policy, c.t.Hedge, func(cctx context.Context) (*http.Response, error) {
		return c.hedgeCopy(cctx, &hs)
	})
	if c.req.Body != nil && !c.bodyUsed {
		c.req.Body.Close() // every copy sent a body of its own (GetBody)
	}
	// Every copy has returned: close the responses of those that lost,
	// without reading them (a server may stall a body; closing ends the
	// copy's request and frees its connection).
	for _, r := range hs.won {
		if (r != resp || err != nil) && r.Body != nil {
			r.Body.Close()
		}
	}
	if resp != nil && err != nil {
		// A status the loop gave up on (or did not retry): hand the
		// server's answer back, as the Transport does without hedging.
		var re *retry.Error
		if errors.As(err, &re) && (re.Attempts > 1 || re.Reason != retry.ReasonPermanent) {
			markTracker(c.ctx)
			if resp.Header == nil {
				resp.Header = make(http.Header, 1)
			}
			resp.Header.Set(HeaderExhausted, "1")
		}
		return resp, nil
	}
	if err != nil {
		var re *retry.Error
		if errors.As(err, &re) && re.Reason != retry.ReasonPermanent && re.Reason != retry.ReasonContext {
			markTracker(c.ctx)
		}
		return nil, err
	}
	return resp, nil
}

// hedgeCopy sends one copy, numbered by its context. The request runs on a
// context of its own, a child of the caller's, which the copy's context
// ends until the response is judged (the body of a retryable answer is
// drained under it); after that only closing the body ends it, so that the
// winner's body stays readable once retry.HedgeValue has ended the copy's
// context.
func (c *call) hedgeCopy(cctx context.Context, hs *hedgeState) (resp *http.Response, err error) {
	n := retry.HedgeAttempt(cctx)
	hs.mu.Lock()
	hs.live++
	hs.mu.Unlock()
	defer func() {
		if err != nil {
			hs.mu.Lock()
			hs.live--
			hs.mu.Unlock()
		}
	}()
	var body io.ReadCloser
	switch {
	case c.buffered:
		body = http.NoBody
		if len(c.buf) > 0 {
			body = io.NopCloser(bytes.NewReader(c.buf))
		}
	case c.req.Body == nil || c.req.Body == http.NoBody:
	default:
		b, err := c.req.GetBody()
		if err != nil {
			hs.mu.Lock()
			others := hs.live > 1
			hs.mu.Unlock()
			if others {
				// This copy cannot be sent, but another may still win:
				// not a fatal answer that would cancel it. No more
				// hedges in this burst (a server wait of zero).
				return nil, retry.ServerWait(&getBodyError{err}, 0)
			}
			return nil, retry.Permanent(&getBodyError{err})
		}
		body = b
	}
	if n > 1 && c.t.Pace != nil && c.t.Pace.n.Load() != 0 {
		if d, hint := c.t.Pace.held(c.req, time.Now()); d > 0 {
			// A hedge cuts a slow copy short; a copy the server's quota
			// holds is not slow, it waits for the reset, and a hedge held
			// with it would be released at the same instant into a quota
			// that may take one. Not sent, and no more hedges in this
			// burst (a server wait of zero): the held copy goes on.
			if body != nil {
				body.Close()
			}
			return nil, retry.ServerWait(&HoldError{Host: c.req.URL.Host, Hint: hint, Wait: d, reason: "a hedge is not held with the copy it hedges"}, 0)
		}
	}
	rctx, cancel := context.WithCancel(c.ctx)
	stop := context.AfterFunc(cctx, cancel)
	r := c.req.Clone(rctx)
	r.Trailer = c.req.Trailer
	if n > 1 {
		if r.Header == nil {
			r.Header = make(http.Header, 1)
		}
		r.Header.Set(HeaderAttempt, strconv.Itoa(n))
	}
	if c.buffered {
		r.GetBody = nil
	}
	if body != nil {
		r.Body = body
	}
	if err = c.t.pace(rctx, r, n, time.Time{}); err == nil {
		resp, err = c.base.RoundTrip(r)
		if err == nil {
			c.t.learn(r, resp)
		}
	} else if body != nil {
		body.Close() // not sent
	}
	if err == nil && resp == nil {
		err = errNilResponse
	}
	if err != nil {
		resp = nil // a Base that returned both breaks the contract
	}
	retryable := err == nil && c.t.retryStatus(resp.StatusCode)
	if retryable {
		// Read the body (bounded) and close it now, so that the
		// connection is free, while the copy's context still ends the
		// request: a server stalling the body cannot hold a copy that
		// lost or ran out of its AttemptTimeout (nor the call, which
		// waits for every copy). The response is kept, in case it is the
		// last answer.
		drainClose(resp)
	}
	if !stop() {
		// The copy's context ended first: it lost, the caller cancelled,
		// or its AttemptTimeout ran out. Its answer, if any, is closed.
		if resp != nil {
			discard(resp)
		}
		cancel()
		cause := cctx.Err()
		if c.ctx.Err() == nil && errors.Is(cause, context.DeadlineExceeded) {
			return nil, &attemptError{method: r.Method, url: r.URL, attempt: n, err: &attemptTimeoutError{c.t.Policy.AttemptTimeout, err}}
		}
		return nil, &attemptError{method: r.Method, url: r.URL, attempt: n, err: cause}
	}
	if err != nil {
		cancel()
		e := &attemptError{method: r.Method, url: r.URL, attempt: n, err: err}
		if c.ctx.Err() != nil || transient(err) {
			return nil, e
		}
		return nil, retry.Permanent(e)
	}
	if !retryable {
		if n > 1 {
			if resp.Header == nil {
				resp.Header = make(http.Header, 1)
			}
			resp.Header.Set(HeaderAttempt, strconv.Itoa(n))
		}
		if resp.Body != nil && resp.Body != http.NoBody {
			resp.Body = newCancelBody(resp.Body, cancel)
		} else {
			cancel()
		}
		hs.mu.Lock()
		hs.won = append(hs.won, resp)
		hs.mu.Unlock()
		return resp, nil
	}
	cancel() // a retryable status, its body drained above
	e := &statusError{resp: resp, method: r.Method, url: r.URL, attempt: n}
	if n > 1 {
		if resp.Header == nil {
			resp.Header = make(http.Header, 1)
		}
		resp.Header.Set(HeaderAttempt, strconv.Itoa(n))
	}
	if Exhausted(resp) {
		if c.t.Policy.RetryExhausted {
			return resp, retry.Permanent(e)
		}
		return resp, exhaustedError{e}
	}
	if err, over := c.t.hinted(resp, e); !over {
		return resp, err
	}
	return resp, retry.Permanent(e)
}

// drainClose reads up to maxDrain bytes of resp's body, closes it, and
// leaves what it read as the body; a longer body ends with errReleased.
func drainClose(resp *http.Response) {
	if resp.Body == nil || resp.Body == http.NoBody {
		return
	}
	var buf bytes.Buffer
	_, err := buf.ReadFrom(io.LimitReader(resp.Body, maxDrain+1))
	resp.Body.Close()
	if err == nil && buf.Len() > maxDrain {
		buf.Truncate(maxDrain)
		err = errReleased
	}
	resp.Body = &readBody{r: bytes.NewReader(buf.Bytes()), err: err}
}
