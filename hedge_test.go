package retry_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/defaults"
	"github.com/retrykit/retry/retrytest"
)

var errHedge = errors.New("test: transient")

// script is an operation whose copies behave as the test says: copy n
// (its attempt number) waits after(n), honouring its context, then
// returns result(n). It records when each copy started and how it ended.
type script struct {
	after  func(n int) time.Duration
	result func(n int) error

	mu        sync.Mutex
	t0        time.Time
	started   []time.Duration // by attempt number - 1
	cancelled []int
	returned  atomic.Int32
}

func (s *script) op(ctx context.Context) error {
	n := retry.HedgeAttempt(ctx)
	s.mu.Lock()
	if s.t0.IsZero() {
		s.t0 = time.Now()
	}
	s.started = append(s.started, time.Since(s.t0))
	s.mu.Unlock()
	defer s.returned.Add(1)
	select {
	case <-time.After(s.after(n)):
		return s.result(n)
	case <-ctx.Done():
		s.mu.Lock()
		s.cancelled = append(s.cancelled, n)
		s.mu.Unlock()
		return ctx.Err()
	}
}

func fixed(t *testing.T, d time.Duration, copies int) *retry.Hedger {
	t.Helper()
	h, err := retry.NewHedger(retry.HedgeConfig{FixedDelay: d, MaxCopies: copies})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestHedgeSlowFirstCopyLosesToHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{
			after:  func(n int) time.Duration { return map[int]time.Duration{1: time.Second, 2: ms(5)}[n] },
			result: func(int) error { return nil },
		}
		var r retrytest.Recorder
		p := retry.Policy{Observer: &r}
		start := time.Now()
		if err := retry.Hedge(t.Context(), p, fixed(t, ms(10), 0), s.op); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != ms(15) {
			t.Errorf("call took %v, want 15ms (hedge at 10ms answering in 5ms)", got)
		}
		if len(s.started) != 2 || s.started[1] != ms(10) {
			t.Errorf("copies started at %v, want [0s 10ms]", s.started)
		}
		if len(s.cancelled) != 1 || s.cancelled[0] != 1 {
			t.Errorf("cancelled copies %v, want [1]", s.cancelled)
		}
		if s.returned.Load() != 2 {
			t.Errorf("%d copies returned before Hedge did, want 2", s.returned.Load())
		}
		want := []retry.EventKind{att, retry.EventHedge, att, retry.EventHedgeWon, retry.EventHedgeCancelled, done}
		if !slices.Equal(r.Kinds(), want) {
			t.Errorf("events %v, want %v", r.Kinds(), want)
		}
		if e := r.Events()[len(r.Events())-1]; e.Attempt != 2 || e.Err != nil {
			t.Errorf("EventDone %+v, want 2 attempts, no error", e)
		}
	})
}

func TestHedgeAnswerBeforeDelaySendsOneCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{after: func(int) time.Duration { return ms(9) }, result: func(int) error { return nil }}
		var r retrytest.Recorder
		if err := retry.Hedge(t.Context(), retry.Policy{Observer: &r}, fixed(t, ms(10), 0), s.op); err != nil {
			t.Fatal(err)
		}
		if len(s.started) != 1 {
			t.Errorf("%d copies, want 1", len(s.started))
		}
		time.Sleep(time.Second) // a timer left armed would send a hedge now
		if len(s.started) != 1 || !slices.Equal(r.Kinds(), []retry.EventKind{att, done}) {
			t.Errorf("after the call: %d copies, events %v", len(s.started), r.Kinds())
		}
	})
}

// A copy that fails fast, with a retryable error, while a slower one is in
// flight, never wins: the call waits for the slower success.
func TestHedgeFastFailureNeverBeatsSlowerSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{
			after: func(n int) time.Duration { return map[int]time.Duration{1: ms(50), 2: ms(1)}[n] },
			result: func(n int) error {
				if n == 2 {
					return errHedge
				}
				return nil
			},
		}
		start := time.Now()
		p := retry.Policy{MaxAttempts: 2}
		if err := retry.Hedge(t.Context(), p, fixed(t, ms(10), 0), s.op); err != nil {
			t.Fatalf("Hedge = %v, want the slower copy's success", err)
		}
		if got := time.Since(start); got != ms(50) {
			t.Errorf("call took %v, want 50ms", got)
		}
	})
}

// A retryable failure while another copy is in flight sends the next copy
// at once (gRFC A6's non-fatal status), before the hedge delay.
func TestHedgeRetryableFailureSendsNextAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{
			after: func(n int) time.Duration { return map[int]time.Duration{1: time.Second, 2: ms(2), 3: ms(3)}[n] },
			result: func(n int) error {
				if n == 2 {
					return errHedge
				}
				return nil
			},
		}
		if err := retry.Hedge(t.Context(), retry.Policy{}, fixed(t, ms(10), 0), s.op); err != nil {
			t.Fatal(err)
		}
		want := []time.Duration{0, ms(10), ms(12)}
		if len(s.started) != 3 || s.started[1] != want[1] || s.started[2] != want[2] {
			t.Errorf("copies started at %v, want %v", s.started, want)
		}
	})
}

func TestHedgeFatalErrorEndsCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fatal := errors.New("test: bad request")
		s := &script{
			after: func(n int) time.Duration { return map[int]time.Duration{1: time.Second, 2: ms(2)}[n] },
			result: func(n int) error {
				if n == 2 {
					return retry.Permanent(fatal)
				}
				return nil
			},
		}
		start := time.Now()
		err := retry.Hedge(t.Context(), retry.Policy{}, fixed(t, ms(10), 0), s.op)
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonPermanent || !errors.Is(err, fatal) || re.Attempts != 2 {
			t.Fatalf("Hedge = %v, want the fatal error after 2 attempts", err)
		}
		if got := time.Since(start); got != ms(12) {
			t.Errorf("call took %v, want 12ms", got)
		}
		if len(s.cancelled) != 1 || s.cancelled[0] != 1 {
			t.Errorf("cancelled %v, want [1]", s.cancelled)
		}
	})
}

// Pushback (a server wait through retry.ServerWait) stops further hedges; the
// copies in flight may still win.
func TestHedgePushbackStopsHedges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{
			after: func(n int) time.Duration { return map[int]time.Duration{1: ms(50), 2: ms(2)}[n] },
			result: func(n int) error {
				if n == 2 {
					return retry.ServerWait(errHedge, time.Second)
				}
				return nil
			},
		}
		if err := retry.Hedge(t.Context(), retry.Policy{}, fixed(t, ms(10), 0), s.op); err != nil {
			t.Fatal(err)
		}
		if len(s.started) != 2 {
			t.Errorf("%d copies sent (at %v), want 2: no hedge after the pushback", len(s.started), s.started)
		}
	})
}

func TestHedgeBudgetRefusesHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: -1})
		if err != nil {
			t.Fatal(err)
		}
		s := &script{after: func(int) time.Duration { return ms(50) }, result: func(int) error { return nil }}
		var r retrytest.Recorder
		p := retry.Policy{Budget: b, Observer: &r}
		if err := retry.Hedge(t.Context(), p, fixed(t, ms(10), 0), s.op); err != nil {
			t.Fatal(err)
		}
		wantHedgeRefused(t, s, &r, retry.ErrBudgetRefused)
	})
}

// wantHedgeRefused checks a call whose one hedge was refused with want:
// one copy ran, and the Observer saw its attempt, the refusal of attempt
// 2 and the end.
func wantHedgeRefused(t *testing.T, s *script, r *retrytest.Recorder, want error) {
	t.Helper()
	if len(s.started) != 1 {
		t.Errorf("%d copies, want 1", len(s.started))
	}
	kinds := []retry.EventKind{att, retry.EventHedgeRefused, done}
	if !slices.Equal(r.Kinds(), kinds) {
		t.Fatalf("events %v, want %v", r.Kinds(), kinds)
	}
	if e := r.Events()[1]; e.Attempt != 2 || !errors.Is(e.Err, want) {
		t.Errorf("refusal %+v, want attempt 2, %v", e, want)
	}
}

// A Throttle that rejects everything refuses the hedge: the first copy
// was let through before the backend looked overloaded, the hedge is
// refused with ErrThrottled and counted as a request, and the call waits
// for the copy in flight. A fleet of 2^62 requests and no accepts makes
// the rejection probability exactly 1 (2^62 / (2^62 + 1) rounds to 1, with
// no cap), so the refusal does not depend on the random draw; with
// CountRejected the refusal is counted.
func TestHedgeThrottleRefusesHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, err := retry.NewThrottle(retry.ThrottleConfig{MaxProbability: 1, CountRejected: true})
		if err != nil {
			t.Fatal(err)
		}
		b, err := retry.NewBudget(retry.BudgetConfig{})
		if err != nil {
			t.Fatal(err)
		}
		s := &script{after: func(int) time.Duration { return ms(50) }, result: func(int) error { return nil }}
		var r retrytest.Recorder
		p := retry.Policy{Throttle: th, Budget: b, Observer: &r}
		err = retry.Hedge(t.Context(), p, fixed(t, ms(10), 0), func(ctx context.Context) error {
			th.SetFleet(1<<62, 0) // the fleet's backend now rejects everything
			if p := th.Probability(); p != 1 {
				t.Fatalf("rejection probability %v, want exactly 1", p)
			}
			return s.op(ctx)
		})
		if err != nil {
			t.Fatal(err)
		}
		wantHedgeRefused(t, s, &r, retry.ErrThrottled)
		// The first copy and the refused hedge are the Throttle's requests;
		// the first copy's success its one accept.
		if req, acc := th.LocalCounts(); req != 2 || acc != 1 {
			t.Errorf("throttle counted %d requests, %d accepts; want 2, 1", req, acc)
		}
		// The refused hedge drew nothing from the Budget.
		if first, retries := b.LocalCounts(); first != 1 || retries != 0 {
			t.Errorf("budget counted %d first attempts, %d retries; want 1, 0", first, retries)
		}
	})
}

func TestHedgeCallerCancelEndsAllCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{after: func(int) time.Duration { return time.Hour }, result: func(int) error { return nil }}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(ms(25), cancel)
		start := time.Now()
		err := retry.Hedge(ctx, retry.Policy{}, fixed(t, ms(10), 0), s.op)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Hedge = %v, want context.Canceled", err)
		}
		if got := time.Since(start); got != ms(25) {
			t.Errorf("call took %v, want 25ms", got)
		}
		if len(s.started) != 3 || s.returned.Load() != 3 {
			t.Errorf("%d copies started, %d returned, want 3 and 3", len(s.started), s.returned.Load())
		}
	})
}

// When every copy in flight failed, the call retries as Do would: after
// the policy's wait, with a new burst.
func TestHedgeRetriesAfterBurstFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{
			after: func(n int) time.Duration { return ms(5) },
			result: func(n int) error {
				if n < 3 {
					return errHedge
				}
				return nil
			},
		}
		p := retry.Policy{Initial: ms(100), Jitter: retry.NoJitter()}
		if err := retry.Hedge(t.Context(), p, fixed(t, ms(10), 0), s.op); err != nil {
			t.Fatal(err)
		}
		want := []time.Duration{0, ms(105), ms(310)}
		if len(s.started) != 3 || s.started[1] != want[1] || s.started[2] != want[2] {
			t.Errorf("copies started at %v, want %v", s.started, want)
		}
	})
}

func TestHedgeCaps(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		maxAttempts, maxCopies int
		want                   int
	}{
		{"MaxAttempts caps copies sent", 3, 5, 3},
		{"MaxCopies caps copies in flight", 10, 2, 2},
		{"MaxCopies 1 means no hedging", 10, 1, 1},
		{"default MaxCopies is 5", 10, 0, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &script{after: func(int) time.Duration { return time.Second }, result: func(int) error { return nil }}
				p := retry.Policy{MaxAttempts: tc.maxAttempts}
				if err := retry.Hedge(t.Context(), p, fixed(t, ms(10), tc.maxCopies), s.op); err != nil {
					t.Fatal(err)
				}
				if len(s.started) != tc.want {
					t.Errorf("%d copies, want %d", len(s.started), tc.want)
				}
			})
		})
	}
}

func TestHedgeValueReturnsWinnersValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := fixed(t, ms(10), 0)
		v, err := retry.HedgeValue(t.Context(), retry.Policy{}, h, func(ctx context.Context) (int, error) {
			n := retry.HedgeAttempt(ctx)
			select {
			case <-time.After(map[int]time.Duration{1: ms(100), 2: ms(50), 3: ms(5)}[n]): // they end at 100, 60, 25ms
				return n, nil
			case <-ctx.Done():
				return -n, ctx.Err()
			}
		})
		if err != nil || v != 3 {
			t.Errorf("HedgeValue = %d, %v; want 3, the third copy's", v, err)
		}
	})
}

// A nil *Hedger is refused, where the zero Hedger hedges with the
// defaults: Hedge and HedgeValue return an error saying so without calling
// op or the Observer (a nil that meant "no hedging" read as the opposite of
// the zero value).
func TestHedgeNilHedgerIsRefused(t *testing.T) {
	var r retrytest.Recorder
	p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3, Observer: &r}
	calls := 0
	err := retry.Hedge(t.Context(), p, nil, func(context.Context) error { calls++; return nil })
	v, verr := retry.HedgeValue(t.Context(), p, nil, func(context.Context) (int, error) { calls++; return 1, nil })
	for _, e := range []error{err, verr} {
		if e == nil || !strings.HasPrefix(e.Error(), "retry: ") || !strings.Contains(e.Error(), "nil *Hedger") {
			t.Errorf("a nil *Hedger gave %v, want an error starting with retry: that names the nil *Hedger", e)
		}
	}
	if calls != 0 || v != 0 || len(r.Kinds()) != 0 {
		t.Errorf("op called %d times, value %d, events %v; want none", calls, v, r.Kinds())
	}
	// The zero Hedger hedges: with a fixed Hedger's test elsewhere, this
	// one only checks that it is accepted and runs the call.
	if err := retry.Hedge(t.Context(), retry.Policy{}, &retry.Hedger{}, func(context.Context) error { calls++; return nil }); err != nil || calls != 1 {
		t.Errorf("Hedge(&Hedger{}) = %v after %d calls, want nil after 1", err, calls)
	}
}

func TestHedgePanicInHedgeIsReraised(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want boom", r)
			}
		}()
		retry.Hedge(t.Context(), retry.Policy{}, fixed(t, ms(10), 0), func(ctx context.Context) error {
			if retry.HedgeAttempt(ctx) == 2 {
				panic("boom")
			}
			<-ctx.Done()
			return ctx.Err()
		})
		t.Error("Hedge returned")
	})
}

func TestHedgeAdaptiveDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := retry.NewHedger(retry.HedgeConfig{Quantile: 0.5, WarmUp: 4, Samples: 8, MinDelay: ms(2)})
		if err != nil {
			t.Fatal(err)
		}
		call := func(d time.Duration) int {
			var copies atomic.Int32
			retry.Hedge(t.Context(), retry.Policy{}, h, func(ctx context.Context) error {
				copies.Add(1)
				select {
				case <-time.After(d):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			return int(copies.Load())
		}
		for i := range 3 {
			if n := call(ms(10 * (i + 1))); n != 1 {
				t.Fatalf("warm-up call %d sent %d copies", i, n)
			}
		}
		if d, ok := h.Delay(); ok {
			t.Fatalf("Delay = %v, true during the warm-up", d)
		}
		call(ms(40))
		if d, ok := h.Delay(); !ok || d != ms(20) {
			t.Fatalf("Delay after 10,20,30,40ms = %v, %v; want the median 20ms", d, ok)
		}
		// Bounded memory: 8 samples of 1 ms push the old ones out; the
		// floor holds the delay at 2 ms.
		for range 8 {
			call(ms(1))
		}
		if d, _ := h.Delay(); d != ms(2) {
			t.Fatalf("Delay = %v, want the 2ms floor", d)
		}
		if n := call(ms(50)); n != 5 {
			t.Errorf("a 50ms call sent %d copies, want 5 (a hedge every 2ms up to MaxCopies)", n)
		}
	})
}

func TestNewHedgerRejectsBadConfig(t *testing.T) {
	for _, c := range []retry.HedgeConfig{
		{FixedDelay: -1},
		{FixedDelay: ms(1), Quantile: 0.9},
		{Quantile: 1},
		{Quantile: -0.5},
		{MinDelay: -1},
		{WarmUp: -1},
		{Samples: -1},
		{MaxCopies: -1},
		{WarmUp: 11, Samples: 10},
	} {
		if h, err := retry.NewHedger(c); err == nil || h != nil {
			t.Errorf("NewHedger(%+v) = %v, %v; want an error", c, h, err)
		} else if len(err.Error()) < 7 || err.Error()[:7] != "retry: " {
			t.Errorf("error %q does not start with the package name", err)
		}
	}
}

func TestHedgeZeroHedgerWarmsUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h retry.Hedger
		if _, ok := h.Delay(); ok {
			t.Fatal("the zero Hedger has a delay before any sample")
		}
		for range defaults.HedgeWarmUp {
			retry.Hedge(t.Context(), retry.Policy{}, &h, func(context.Context) error {
				time.Sleep(ms(3))
				return nil
			})
		}
		if d, ok := h.Delay(); !ok || d != ms(3) {
			t.Errorf("Delay = %v, %v after %d calls of 3ms, want 3ms", d, ok, defaults.HedgeWarmUp)
		}
	})
}

// Many goroutines share one adaptive Hedger, Budget, Throttle and
// Observer; copies answer and fail, racing each other in real time. Under
// -race: every call ends with its winner's value or an error, and no copy
// outlives its call.
func TestHedgeConcurrentCalls(t *testing.T) {
	h, err := retry.NewHedger(retry.HedgeConfig{WarmUp: 10, Samples: 64, MinDelay: 50 * time.Microsecond, MaxCopies: 3})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := retry.NewBudget(retry.BudgetConfig{Ratio: 0.5})
	th, _ := retry.NewThrottle(retry.ThrottleConfig{})
	var r retrytest.Recorder
	p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 4, Budget: b, Throttle: th, Observer: &r}
	var running atomic.Int32
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				v, err := retry.HedgeValue(t.Context(), p, h, func(ctx context.Context) (int, error) {
					running.Add(1)
					defer running.Add(-1)
					n := retry.HedgeAttempt(ctx)
					select {
					case <-time.After(time.Duration((g*7+i*3+n)%5) * 100 * time.Microsecond):
					case <-ctx.Done():
						return 0, ctx.Err()
					}
					if (g+i+n)%4 == 0 {
						return 0, errHedge
					}
					return n, nil
				})
				if err == nil && v < 1 {
					t.Errorf("value %d from a successful call", v)
				}
				if err != nil && !errors.Is(err, errHedge) && !errors.Is(err, retry.ErrThrottled) && !errors.Is(err, retry.ErrBudgetRefused) {
					t.Errorf("unexpected error %v", err)
				}
			}
		})
	}
	wg.Wait()
	if n := running.Load(); n != 0 {
		t.Errorf("%d copies still running after every call returned", n)
	}
	if _, ok := h.Delay(); !ok {
		t.Error("the adaptive Hedger never warmed up")
	}
}
