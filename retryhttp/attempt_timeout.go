package retryhttp

import (
	"context"
	"io"
	"net/http"
)

// tryTimed sends one attempt under the policy's AttemptTimeout. actx is
// the attempt's own context, which the Loop made in Begin with that
// timeout, exactly as retry.Do makes it, and which the Loop ends once the
// attempt is reported: the Loop then tells, as in retry.Do, whether the
// attempt ran out of its own timeout while the caller's context was alive
// (retried whatever Policy.Retryable says, and a rejection for a
// Throttle).
//
// The request does not run on actx itself: the Loop ends actx when
// the attempt returns, which would cut the body of a response handed out.
// It runs on a child of the caller's context that actx ends (its timeout
// or the caller's end) only until the response headers have arrived and
// been judged; after that, only closing the body ends it. The body of a
// retried response, which judge drains itself (see release), is read
// while actx still ends the request, so a server stalling it cannot hold
// the call. Whether the attempt made it in time is decided once, by
// whichever comes first, actx's end (which then cancels the request) or
// the stop of that link once the response is judged, so a response racing
// the timeout is either returned with a live context or treated as timed
// out, never both.
func (c *call) tryTimed(actx context.Context, body io.ReadCloser) (*http.Response, error) {
	rctx, cancel := context.WithCancel(c.ctx)
	stop := context.AfterFunc(actx, cancel)
	handedOut := false
	defer func() {
		// On every path but a response handed out (whose body's Close
		// cancels), including a panic in Base: end the request's context,
		// so that it does not stay registered on the caller's.
		if !handedOut {
			stop()
			cancel()
		}
	}()
	r := c.prepare(rctx, body)
	resp, err := c.base.RoundTrip(r)
	if err == nil && resp == nil {
		err = errNilResponse
	}
	if err != nil {
		resp = nil // a Base that returned both breaks the contract
	}
	var serr error // judge's verdict on resp
	if err == nil {
		c.t.learn(r, resp)
		wrapped := resp.Body != nil && resp.Body != http.NoBody
		if wrapped {
			resp.Body = newCancelBody(resp.Body, cancel)
		}
		// judge may drain the body of a response to retry: still under
		// actx. RetryStatus may panic: the deferred cancel runs then.
		resp, serr = c.judge(r, resp)
		handedOut = wrapped
	}
	if !stop() {
		// actx ended first, and with it the request: the attempt ran out
		// of its timeout (or the caller's context ended), whatever Base
		// returned or judge made of it.
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
		return nil, c.classify(r, &attemptTimeoutError{c.t.Policy.AttemptTimeout, err})
	}
	if err != nil {
		return nil, c.classify(r, err)
	}
	// With no body to read, handedOut is false: the request's context ends
	// now. Otherwise closing the body ends it (a drained body is closed).
	return resp, serr
}
