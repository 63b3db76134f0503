package retryhttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retrytest"
)

// outcome is what a test compares between retry.Do and the Transport for
// the same call: success, the attempts made, the reason given, and the
// events the Observer saw (without their errors and times, which differ
// by design: the Transport's errors describe the request).
type outcome struct {
	ok       bool
	attempts int
	reason   retry.Reason
	sent     int
	events   []string
}

func (o outcome) String() string {
	return fmt.Sprintf("ok %v, %d attempts, %d sent, reason %v, events %q", o.ok, o.attempts, o.sent, o.reason, o.events)
}

func eventsOf(rec *retrytest.Recorder) []string {
	var out []string
	for _, c := range rec.Calls() {
		for _, e := range c.Events {
			out = append(out, fmt.Sprintf("%v #%d/%d delay %v reason %v", e.Kind, e.Attempt, e.MaxAttempts, e.Delay, e.Reason))
		}
	}
	return out
}

// sideBySide runs one call with the policy of mk twice, over a scripted
// backend each: through retry.Do, whose operation sends the request with
// its attempt's context and fails on a status the Transport retries, and
// through a Transport. Each side gets a policy of its own from mk (a
// Throttle of its own, say), whose Observer is replaced by a Recorder.
func sideBySide(t *testing.T, mk func() retry.Policy, script ...retrytest.Reply) (do, tr outcome) {
	t.Helper()
	url := "http://127.0.0.1/x"

	var doRec retrytest.Recorder
	doBE := retrytest.NewBackend(script...)
	p := mk()
	p.Observer = &doRec
	err := retry.Do(t.Context(), p, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		resp, err := doBE.RoundTrip(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if retryhttp.DefaultRetryStatus(resp.StatusCode) {
			return errors.New(resp.Status)
		}
		return nil
	})
	do = outcome{ok: err == nil, attempts: doBE.Total().Requests, sent: doBE.Total().Requests, events: eventsOf(&doRec)}
	var re *retry.Error
	if errors.As(err, &re) {
		do.attempts, do.reason = re.Attempts, re.Reason
	}

	var trRec retrytest.Recorder
	trBE := retrytest.NewBackend(script...)
	p = mk()
	p.Observer = &trRec
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	resp, err := (&retryhttp.Transport{Base: trBE, Policy: p}).RoundTrip(req)
	tr = outcome{sent: trBE.Total().Requests, events: eventsOf(&trRec)}
	switch {
	case err == nil:
		resp.Body.Close()
		tr.ok = !retryhttp.DefaultRetryStatus(resp.StatusCode)
		tr.attempts = max(retryhttp.Attempts(resp), 1)
		// A status given up on comes back as a response: its reason is
		// the EventDone's.
		if n := len(trRec.Calls()); n > 0 {
			c := trRec.Calls()[n-1]
			tr.reason = c.Events[len(c.Events)-1].Reason
		}
	case errors.As(err, &re):
		tr.attempts, tr.reason = re.Attempts, re.Reason
	default:
		t.Fatalf("Transport: %v", err)
	}
	return do, tr
}

// An attempt cut short by its own AttemptTimeout while the caller's
// context is alive is judged by the core's loop, as in retry.Do: retried
// whatever Policy.Retryable says, with the same reasons and events.
func TestAttemptTimeoutAsDo(t *testing.T) {
	const d = 30 * time.Millisecond
	slow := retrytest.Reply{Latency: time.Hour} // cut by the attempt timeout
	ok := retrytest.Reply{Status: 200, Body: "ok"}
	never := func(error) bool { return false }
	for _, tc := range []struct {
		name   string
		p      retry.Policy
		script []retrytest.Reply
		want   outcome // ok, attempts, reason
	}{
		{"slow first, Retryable refuses everything", retry.Policy{Initial: retry.Immediate, AttemptTimeout: d, Retryable: never},
			[]retrytest.Reply{slow, ok}, outcome{ok: true, attempts: 2}},
		{"slow first, default rule", retry.Policy{Initial: retry.Immediate, AttemptTimeout: d},
			[]retrytest.Reply{slow, ok}, outcome{ok: true, attempts: 2}},
		{"slow, then a 503 that Retryable refuses", retry.Policy{Initial: retry.Immediate, AttemptTimeout: d, Retryable: never},
			[]retrytest.Reply{slow, {Status: 503}, ok}, outcome{attempts: 2, reason: retry.ReasonPermanent}},
		{"slow every time", retry.Policy{Initial: retry.Immediate, MaxAttempts: 3, AttemptTimeout: d, Retryable: never},
			[]retrytest.Reply{slow}, outcome{attempts: 3, reason: retry.ReasonAttempts}},
		{"cut by MaxElapsed", retry.Policy{Initial: 10 * time.Millisecond, Jitter: retry.NoJitter(), MaxElapsed: 50 * time.Millisecond, AttemptTimeout: d, Retryable: never},
			[]retrytest.Reply{slow}, outcome{attempts: 2, reason: retry.ReasonTimeBudget}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				do, tr := sideBySide(t, func() retry.Policy { return tc.p }, tc.script...)
				if do.ok != tc.want.ok || do.attempts != tc.want.attempts || do.reason != tc.want.reason {
					t.Errorf("retry.Do: %v; want ok %v, %d attempts, reason %v", do, tc.want.ok, tc.want.attempts, tc.want.reason)
				}
				if tr.ok != do.ok || tr.attempts != do.attempts || tr.sent != do.sent || tr.reason != do.reason || !slices.Equal(tr.events, do.events) {
					t.Errorf("Transport and retry.Do differ:\nTransport: %v\nretry.Do:  %v", tr, do)
				}
			})
		})
	}
}

// A Throttle counts an attempt cut short by its AttemptTimeout as
// retry.Do counts it: a rejection (two of three attempts rejected leave a
// rejection probability of (3 - 2×1)/(3+1) with the default K of 2; had
// they counted as accepted, none).
func TestAttemptTimeoutThrottleAsDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := retrytest.Reply{Latency: time.Hour}
		var throttles []*retry.Throttle
		mk := func() retry.Policy {
			th, err := retry.NewThrottle(retry.ThrottleConfig{})
			if err != nil {
				t.Fatal(err)
			}
			th.Override(retry.ThrottleAllowAll) // every attempt sent, still counted
			throttles = append(throttles, th)
			return retry.Policy{Initial: retry.Immediate, AttemptTimeout: 30 * time.Millisecond, Throttle: th}
		}
		do, tr := sideBySide(t, mk, slow, slow, retrytest.Reply{Status: 200})
		if !do.ok || !tr.ok || do.attempts != 3 || tr.attempts != 3 || !slices.Equal(tr.events, do.events) {
			t.Fatalf("retry.Do: %v\nTransport: %v", do, tr)
		}
		var probs []float64
		for _, th := range throttles {
			th.Override(retry.ThrottleAuto)
			probs = append(probs, th.Probability())
		}
		if probs[0] != 0.25 || probs[1] != probs[0] {
			t.Fatalf("rejection probability: retry.Do's Throttle %v, the Transport's %v; want 0.25 for both", probs[0], probs[1])
		}
	})
}

// The body of a response stays readable, read by read, for longer than
// the AttemptTimeout that bounded the attempt: the timeout ends at the
// response headers, and only closing the body ends the request.
func TestAttemptTimeoutBodyOutlivesTimeout(t *testing.T) {
	const d = 30 * time.Millisecond
	const size = 64 << 10
	t.Run("in memory", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var reqCtx context.Context
			rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				reqCtx = r.Context()
				return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{}, Request: r,
					Body: &ctxBody{ctx: r.Context(), r: strings.NewReader(strings.Repeat("x", size))}}, nil
			})
			tr := &retryhttp.Transport{Base: rt, Policy: retry.Policy{AttemptTimeout: d}}
			req, _ := http.NewRequest("GET", "http://127.0.0.1/x", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4<<10)
			read, reads := 0, 0
			for {
				time.Sleep(2 * d) // the caller takes its time between reads
				n, err := resp.Body.Read(buf)
				read += n
				reads++
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("after %d bytes in %d reads: %v", read, reads, err)
				}
			}
			if read != size || reads < 10 {
				t.Fatalf("read %d bytes in %d reads, want %d in many", read, reads, size)
			}
			if reqCtx.Err() != nil {
				t.Fatal("the request's context ended before the body was closed")
			}
			resp.Body.Close()
			if reqCtx.Err() == nil {
				t.Fatal("closing the body did not end the request's context")
			}
		})
	})
	t.Run("httptest", func(t *testing.T) {
		var sent atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sent.Add(1)
			for range size / (4 << 10) {
				io.WriteString(w, strings.Repeat("y", 4<<10))
				w.(http.Flusher).Flush()
			}
		}))
		t.Cleanup(srv.Close)
		c := client(t, &retryhttp.Transport{Policy: retry.Policy{Initial: retry.Immediate, AttemptTimeout: 200 * time.Millisecond}})
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		head := make([]byte, 100)
		if _, err := io.ReadFull(resp.Body, head); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // past the attempt timeout
		rest, err := io.ReadAll(resp.Body)
		if err != nil || len(head)+len(rest) != size {
			t.Fatalf("read %d bytes, err %v (%d sent)", len(head)+len(rest), err, sent.Load())
		}
	})
}
