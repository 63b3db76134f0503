package retryhttp_test

// Promises of the Transport around the held-back EventAttempt, responses
// marked Retry-Exhausted and an over-long Retry-After at the last attempt,
// each found broken by a review and fixed.

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retrytest"
)

func scriptedResp(r *http.Request, code int, h http.Header) *http.Response {
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Header: h,
		Body: io.NopCloser(strings.NewReader("x")), ContentLength: 1, Request: r,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
}

// retry.Observer: "for EventAttempt, the attempt's own context when the
// policy has an AttemptTimeout"; Transport.Policy: hooks "see every
// attempt sent, as in retry.Do". retry.Do's attempt context carries the
// AttemptTimeout as a deadline, which an Observer can read
// (ctx.Deadline()); the held-back EventAttempt of d7c9db3 is reported with
// tryTimed's context.WithCancel, which has no deadline.
func TestAttemptEventContextHasDeadline(t *testing.T) {
	const timeout = 5 * time.Second
	type seen struct {
		has bool
		dl  time.Time
	}
	observe := func(out *[]seen) retry.Policy {
		return retry.Policy{Initial: retry.Immediate, MaxAttempts: 2, AttemptTimeout: timeout,
			Observer: retry.ObserverFunc(func(ctx context.Context, e retry.Event) {
				if e.Kind == retry.EventAttempt {
					dl, ok := ctx.Deadline()
					*out = append(*out, seen{ok, dl})
				}
			})}
	}
	var do []seen
	retry.Do(t.Context(), observe(&do), func(context.Context) error { return nil })
	if len(do) != 1 || !do[0].has {
		t.Fatalf("retry.Do: EventAttempt contexts %+v, want one with a deadline", do)
	}

	var viaHTTP []seen
	tr := &retryhttp.Transport{Policy: observe(&viaHTTP), Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return scriptedResp(r, http.StatusOK, nil), nil
	})}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://example.invalid/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(viaHTTP) != 1 {
		t.Fatalf("Transport: %d EventAttempt, want 1", len(viaHTTP))
	}
	if !viaHTTP[0].has {
		t.Errorf("Transport: the context of EventAttempt under AttemptTimeout %v has no deadline; retry.Do's has one (%v from now)",
			timeout, time.Until(do[0].dl).Round(time.Second))
	}
}

// d7c9db3: "a last attempt's 503 with an over-long Retry-After gives up on
// the attempt limit (reason attempts, not permanent)". judge decides "last
// attempt" with c.n, the attempts *sent*, while the loop's limit counts
// the attempts a Throttle rejected too: after one throttled attempt, the
// loop's last attempt is not c.mayRetry()'s last, and the call ends with
// ReasonPermanent.
func TestLastAttemptAfterThrottledLongRetryAfter(t *testing.T) {
	th, err := retry.NewThrottle(retry.ThrottleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var rec retrytest.Recorder
	p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3, Throttle: th,
		Observer: retry.Observers(&rec, retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			switch {
			case e.Kind == retry.EventRetry && e.Attempt == 1:
				th.Override(retry.ThrottleRejectAll) // attempt 2 is rejected locally
			case e.Kind == retry.EventThrottled:
				th.Override(retry.ThrottleAllowAll) // attempt 3 goes through
			}
		}))}
	sends := 0
	tr := &retryhttp.Transport{Policy: p, Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sends++
		h := http.Header{}
		if sends == 2 { // the loop's attempt 3, its last
			h.Set("Retry-After", "3600")
		}
		return scriptedResp(r, http.StatusServiceUnavailable, h), nil
	})}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://example.invalid/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	events := rec.Kinds()
	if sends != 2 || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("%d sends, status %d; events %v; want 2 sends (attempt 2 throttled), 503", sends, resp.StatusCode, events)
	}
	if reason := rec.Reason(); reason != retry.ReasonAttempts {
		t.Errorf("events %v: EventDone reason %q, want %q: the loop's last attempt (3 of 3) ended on the attempt limit",
			events, reason, retry.ReasonAttempts)
	}
}

// Before d7c9db3 a response a lower layer marked Retry-Exhausted was
// Permanent, so the loop returned it whatever the context did. As
// exhaustedError it reaches stopReason's context check first: a caller's
// context that ends as the response arrives now makes RoundTrip discard
// the response and return a *retry.Error (ReasonContext), though the
// response was never going to be retried ("A Transport receiving it does
// not retry").
func TestExhaustedResponseReturnedWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	tr := &retryhttp.Transport{Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 3},
		Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			h := http.Header{}
			h.Set(retryhttp.HeaderExhausted, "1")
			cancel() // the caller gives up just as the answer arrives
			return scriptedResp(r, http.StatusServiceUnavailable, h), nil
		})}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://example.invalid/", nil)
	resp, err := tr.RoundTrip(req)
	if resp != nil {
		resp.Body.Close()
	}
	if err != nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("RoundTrip = %v, %v; want the Retry-Exhausted 503 with a nil error (as for any response the Transport does not retry, and as before d7c9db3)", resp, err)
	}
}
