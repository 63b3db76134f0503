package retrygax_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/googleapis/gax-go/v2"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rejectingThrottle returns a Throttle that rejects (almost) every request.
func rejectingThrottle(t *testing.T) *retry.Throttle {
	t.Helper()
	th, err := retry.NewThrottle(retry.ThrottleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	th.Override(retry.ThrottleRejectAll)
	return th
}

// WithPolicy promises the Observer "EventDone (with the *retry.Error it
// would have returned) as retry.Do tells them". When the Throttle rejects
// the retries left after a failed attempt, retry.Do's *retry.Error wraps
// both ErrThrottled and the failed attempt's error (what the backend
// answered); WithPolicy's must too.
func TestThrottledDoneKeepsLastAttemptError(t *testing.T) {
	backendErr := status.Error(codes.Unavailable, "down")

	// retry.Do, the reference: the Throttle lets the first attempt
	// through (retry.Do asks it before every attempt) and then rejects.
	var ref retrytest.Recorder
	refTh, err := retry.NewThrottle(retry.ThrottleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p := fast
	p.MaxAttempts = 3
	p.Throttle, p.Observer = refTh, &ref
	calls := 0
	retry.Do(t.Context(), p, func(context.Context) error {
		calls++
		refTh.Override(retry.ThrottleRejectAll)
		return backendErr
	})
	var refSt interface{ GRPCStatus() *status.Status }
	refDone, refOK := ref.Done()
	if calls != 1 || !refOK || !errors.As(refDone.Err, &refSt) || refSt.GRPCStatus().Code() != codes.Unavailable {
		t.Fatalf("reference: %d calls, EventDone %+v", calls, refDone)
	}

	var got retrytest.Recorder
	p.Throttle, p.Observer = rejectingThrottle(t), &got
	f := &fakeRedis{script: failing(100, backendErr)}
	c := grpcClient(t, f)
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p)}
	if _, err := getInstance(t.Context(), c); status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v", err)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("server saw %d calls, want 1", n)
	}
	gotDone, ok := got.Done()
	if !ok {
		t.Fatal("no EventDone")
	}
	t.Logf("retry.Do EventDone.Err: %v (reason %v, code %v)", refDone.Err, refDone.Reason, status.Code(refDone.Err))
	t.Logf("retrygax EventDone.Err: %v (reason %v)", gotDone.Err, gotDone.Reason)
	if gotDone.Reason != retry.ReasonAttempts || !errors.Is(gotDone.Err, retry.ErrThrottled) {
		t.Fatalf("EventDone %+v: want ReasonAttempts and ErrThrottled", gotDone)
	}
	var st interface{ GRPCStatus() *status.Status }
	if !errors.As(gotDone.Err, &st) || st.GRPCStatus().Code() != codes.Unavailable {
		t.Errorf("EventDone.Err = %v: the failed attempt's UNAVAILABLE is lost (retry.Do's keeps it: %v)", gotDone.Err, refDone.Err)
	}
}

// throttleScript drives a Throttle from the events of one call, retry.Do's
// or WithPolicy's alike: each attempt sent (EventAttempt) makes it reject
// every attempt; after allowAfter rejections (0: never), or once the call
// is liftAfter old (0: never), it lets the next one through. A loop that
// asks again and again with no time passing is stopped: 50 rejections at
// one instant lift the override, so that the test ends, and set spun.
type throttleScript struct {
	th         *retry.Throttle
	allowAfter int
	liftAfter  time.Duration
	start      time.Time

	mu       sync.Mutex
	rejected int // since the last attempt sent
	same     int // rejections at the instant of the one before
	last     time.Time
	spun     bool
	rec      retrytest.Recorder
}

func (s *throttleScript) Observe(ctx context.Context, e retry.Event) {
	s.rec.Observe(ctx, e)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e.Kind {
	case retry.EventAttempt:
		s.rejected = 0
		s.th.Override(retry.ThrottleRejectAll)
	case retry.EventThrottled:
		s.rejected++
		now := time.Now()
		if now.Equal(s.last) {
			s.same++
		} else {
			s.same = 0
		}
		s.last = now
		switch {
		case s.same >= 50:
			s.spun = true
			s.th.Override(retry.ThrottleAllowAll)
		case s.allowAfter > 0 && s.rejected == s.allowAfter,
			s.liftAfter > 0 && now.Sub(s.start) >= s.liftAfter:
			s.th.Override(retry.ThrottleAllowAll)
		}
	}
}

// throttledRun is what a call under a throttleScript did: when each
// attempt was sent, from the call's start, and the events.
type throttledRun struct {
	sent      []time.Duration
	attempts  int // EventAttempt: sent
	throttled int // EventThrottled
	done      retry.Event
	hasDone   bool
	spun      bool
	err       error
}

// TestThrottleRejectedWaitsAsDo: while the Throttle rejects the retries,
// WithPolicy adds up their waits for gax to sleep only where a stop rule
// ends the sum, and then the attempts sent, the waits before them and the
// reason the call ends are retry.Do's: no attempt is sent at or past
// MaxElapsed. With Unlimited attempts and no MaxElapsed, the Retryer
// waits each rejected retry's wait itself, as retry.Do does, and never
// spins. Every run is bounded: throttleScript ends a loop that spins.
func TestThrottleRejectedWaitsAsDo(t *testing.T) {
	for _, tc := range []struct {
		name       string
		p          retry.Policy
		allowAfter int
		liftAfter  time.Duration
		ok         bool // the call succeeds at its second attempt sent
	}{
		{
			// Waits of 6 s each: added up at one instant, every one
			// fitted in 10 s, and the Retryer looped for ever.
			name: "MaxDelay under MaxElapsed, every retry rejected",
			p:    retry.Policy{MaxAttempts: retry.Unlimited, MaxElapsed: 10 * time.Second, Initial: 6 * time.Second, MaxDelay: 6 * time.Second, Jitter: retry.NoJitter()},
		},
		{
			// 1 + 2 + 4 s, sent at 7 s; then 4 + 4 + 4 s would send at
			// 19 s: the second 4 s wait would end at 15 s, MaxElapsed.
			name:       "two of three retries rejected",
			p:          retry.Policy{MaxAttempts: retry.Unlimited, MaxElapsed: 15 * time.Second, Initial: time.Second, MaxDelay: 4 * time.Second, Jitter: retry.NoJitter()},
			allowAfter: 2,
		},
		{
			name:      "Unlimited, no MaxElapsed, rejected for 30 s",
			p:         retry.Policy{MaxAttempts: retry.Unlimited, Initial: time.Second, MaxDelay: 2 * time.Second, Jitter: retry.NoJitter()},
			liftAfter: 30 * time.Second,
			ok:        true,
		},
		{
			name: "finite MaxAttempts, no MaxElapsed, every retry rejected",
			p:    retry.Policy{MaxAttempts: 5, Initial: time.Second, MaxDelay: 2 * time.Second, Jitter: retry.NoJitter()},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				run := func(call func(ctx context.Context, p retry.Policy, op func() error) error) throttledRun {
					th, err := retry.NewThrottle(retry.ThrottleConfig{})
					if err != nil {
						t.Fatal(err)
					}
					s := &throttleScript{th: th, allowAfter: tc.allowAfter, liftAfter: tc.liftAfter, start: time.Now()}
					p := tc.p
					p.Throttle, p.Observer = th, s
					var r throttledRun
					r.err = call(t.Context(), p, func() error {
						r.sent = append(r.sent, time.Since(s.start))
						if tc.ok && len(r.sent) == 2 {
							return nil
						}
						return status.Error(codes.Unavailable, "down")
					})
					r.attempts, r.throttled = len(s.rec.Of(retry.EventAttempt)), len(s.rec.Of(retry.EventThrottled))
					r.done, r.hasDone = s.rec.Done()
					r.spun = s.spun
					return r
				}
				ref := run(func(ctx context.Context, p retry.Policy, op func() error) error {
					return retry.Do(ctx, p, func(context.Context) error { return op() })
				})
				got := run(func(ctx context.Context, p retry.Policy, op func() error) error {
					return gax.Invoke(ctx, func(context.Context, gax.CallSettings) error { return op() }, mustPolicy(p))
				})
				if ref.spun || (ref.err == nil) != tc.ok {
					t.Fatalf("reference: retry.Do spun (%v) or ended with %v", ref.spun, ref.err)
				}
				if got.spun {
					t.Fatalf("the Retryer asked the Throttle 50 times with no time passing (sends at %v)", got.sent)
				}
				t.Logf("retry.Do: sends at %v, %d sent, %d rejected, %v", ref.sent, ref.attempts, ref.throttled, ref.err)
				t.Logf("retrygax: sends at %v, %d sent, %d rejected, %v", got.sent, got.attempts, got.throttled, got.err)
				if (got.err == nil) != tc.ok {
					t.Errorf("gax.Invoke = %v", got.err)
				}
				if max := tc.p.MaxElapsed; max > 0 && slices.ContainsFunc(got.sent, func(d time.Duration) bool { return d >= max }) {
					t.Errorf("an attempt sent at or past MaxElapsed %v: %v", max, got.sent)
				}
				if !slices.Equal(got.sent, ref.sent) || got.attempts != ref.attempts || got.throttled != ref.throttled {
					t.Errorf("sends at %v, %d EventAttempt, %d EventThrottled; retry.Do's: %v, %d, %d",
						got.sent, got.attempts, got.throttled, ref.sent, ref.attempts, ref.throttled)
				}
				if tc.ok {
					return // a success's EventDone comes through grpc.OnFinish, which gax.Invoke alone does not call
				}
				if !got.hasDone || got.done.Reason != ref.done.Reason || got.done.Attempt != ref.done.Attempt || got.done.Waited != ref.done.Waited {
					t.Errorf("EventDone %+v; retry.Do's %+v", got.done, ref.done)
				}
			})
		})
	}
}
