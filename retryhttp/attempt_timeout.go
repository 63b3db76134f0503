package retryhttp

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

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
		c.t.learn(r, resp)
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
