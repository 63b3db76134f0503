package retryotel_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/retryotel"
	"github.com/retrykit/retry/retrytest"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

var (
	errFlaky = errors.New("flaky")
	opAttr   = retryotel.AttrOperation.String("op")
)

func reasonAttr(v string) attribute.KeyValue { return retryotel.AttrReason.String(v) }

// fast is a policy with exact waits of 10 ms, 20 ms, 40 ms, …
func fast(attempts int) retry.Policy {
	return retry.Policy{Initial: 10 * time.Millisecond, MaxDelay: time.Second, Jitter: retry.NoJitter(), MaxAttempts: attempts}
}

// failing returns an op that fails its first n calls with err, then
// succeeds, and the counter of its calls.
func failing(n int, err error) (func(context.Context) error, *atomic.Int64) {
	var calls atomic.Int64
	return func(context.Context) error {
		if calls.Add(1) <= int64(n) {
			return err
		}
		return nil
	}, &calls
}

func TestInstrumentMetrics(t *testing.T) {
	inner := &retry.Error{Attempts: 2, Reason: retry.ReasonAttempts, Err: errFlaky}
	tests := []struct {
		name     string
		policy   func(*retry.Policy)
		ctx      func(context.Context) (context.Context, context.CancelFunc)
		failures int   // op fails this many times, then succeeds
		err      error // with this error
		cancelIn bool  // op cancels the call's context on its first call

		wantCalls    int64
		wantAttempts int64
		wantDelay    float64 // s; negative: no retry_delay point
		wantReason   string  // "" for success
		wantRefused  int64
	}{
		{name: "success at once", failures: 0, wantCalls: 1, wantAttempts: 1, wantDelay: -1},
		{name: "success at the third attempt", failures: 2, err: errFlaky, wantCalls: 3, wantAttempts: 3, wantDelay: 0.030},
		{name: "attempts", failures: 9, err: errFlaky, wantCalls: 3, wantAttempts: 3, wantDelay: 0.030, wantReason: "attempts"},
		{name: "permanent", failures: 1, err: retry.Permanent(errFlaky), wantCalls: 1, wantAttempts: 1, wantDelay: -1, wantReason: "permanent"},
		{name: "exhausted", failures: 1, err: fmt.Errorf("inner: %w", inner), wantCalls: 1, wantAttempts: 1, wantDelay: -1, wantReason: "exhausted"},
		{name: "time budget", policy: func(p *retry.Policy) { p.MaxElapsed = 25 * time.Millisecond },
			failures: 9, err: errFlaky, wantCalls: 2, wantAttempts: 2, wantDelay: 0.010, wantReason: "time_budget"},
		{name: "deadline", ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 15*time.Millisecond)
		}, failures: 9, err: errFlaky, wantCalls: 2, wantAttempts: 2, wantDelay: 0.010, wantReason: "deadline"},
		{name: "context done before the first attempt", ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return ctx, cancel
		}, wantCalls: 0, wantAttempts: 0, wantDelay: -1, wantReason: "context"},
		{name: "context", failures: 9, err: errFlaky, cancelIn: true, wantCalls: 1, wantAttempts: 1, wantDelay: -1, wantReason: "context"},
		{name: "budget", policy: func(p *retry.Policy) {
			b, err := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: -1})
			if err != nil {
				t.Fatal(err)
			}
			p.Budget = b
		}, failures: 9, err: errFlaky, wantCalls: 1, wantAttempts: 1, wantDelay: -1, wantReason: "budget", wantRefused: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mp, reader := newMeter(t)
				p := fast(3)
				if tc.policy != nil {
					tc.policy(&p)
				}
				var own retrytest.Recorder
				p.Observer = &own
				p = retryotel.Instrument(p, "op", retryotel.WithMeterProvider(mp))

				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tc.ctx != nil {
					ctx, cancel = tc.ctx(ctx)
					defer cancel()
				}
				op, calls := failing(tc.failures, tc.err)
				if tc.cancelIn {
					inner := op
					op = func(ctx context.Context) error { cancel(); return inner(ctx) }
				}
				err := retry.Do(ctx, p, op)

				if got := calls.Load(); got != tc.wantCalls {
					t.Fatalf("op called %d times, want %d (err %v)", got, tc.wantCalls, err)
				}
				var re *retry.Error
				if tc.wantReason == "" && err != nil || tc.wantReason != "" && !errors.As(err, &re) {
					t.Fatalf("Do = %v, want reason %q", err, tc.wantReason)
				}
				if kinds := own.Kinds(); len(kinds) == 0 || kinds[len(kinds)-1] != retry.EventDone {
					t.Errorf("the policy's own Observer saw %v, want it kept and told of the end", kinds)
				}

				m := collect(t, reader)
				if n, sum := m.hist("retry.call.attempts", opAttr); n != 1 || int64(sum) != tc.wantAttempts {
					t.Errorf("retry.call.attempts: count %d sum %v, want 1 and %d", n, sum, tc.wantAttempts)
				}
				n, sum := m.hist("retry.call.retry_delay", opAttr)
				switch {
				case tc.wantDelay < 0 && n != 0:
					t.Errorf("retry.call.retry_delay recorded %d times for a call that did not retry", n)
				case tc.wantDelay >= 0 && (n != 1 || math.Abs(sum-tc.wantDelay) > 1e-9):
					t.Errorf("retry.call.retry_delay: count %d sum %v, want 1 and %v", n, sum, tc.wantDelay)
				}
				v, total := m.counter("retry.call.gave_up", opAttr, reasonAttr(tc.wantReason))
				switch {
				case tc.wantReason == "" && total != 0:
					t.Errorf("retry.call.gave_up = %d for a successful call", total)
				case tc.wantReason != "" && (v != 1 || total != 1):
					t.Errorf("retry.call.gave_up{reason=%s} = %d (all reasons %d), want 1", tc.wantReason, v, total)
				}
				if re != nil && retryotelReason(re.Reason) != tc.wantReason {
					t.Errorf("Do gave up with %v, test expects %s", re.Reason, tc.wantReason)
				}
				if v, _ := m.counter("retry.retry.refused", opAttr); v != tc.wantRefused {
					t.Errorf("retry.retry.refused = %d, want %d", v, tc.wantRefused)
				}
			})
		})
	}
}

// retryotelReason is the documented mapping, written out independently of
// the package's table.
func retryotelReason(r retry.Reason) string {
	return map[retry.Reason]string{
		retry.ReasonAttempts: "attempts", retry.ReasonPermanent: "permanent", retry.ReasonExhausted: "exhausted",
		retry.ReasonTimeBudget: "time_budget", retry.ReasonDeadline: "deadline", retry.ReasonContext: "context",
		retry.ReasonBudget: "budget",
	}[r]
}

// TestReasonValues feeds every Reason through the observer and checks the
// retry.reason values, in the order of the constants.
func TestReasonValues(t *testing.T) {
	mp, reader := newMeter(t)
	o := retryotel.Instrument(retry.Policy{}, "op", retryotel.WithMeterProvider(mp)).Observer
	want := []string{"attempts", "permanent", "exhausted", "time_budget", "deadline", "context", "budget"}
	for i := range want {
		r := retry.ReasonAttempts + retry.Reason(i)
		o.Observe(context.Background(), retry.Event{Kind: retry.EventDone, Attempt: 1, Err: &retry.Error{Reason: r}, Reason: r})
	}
	o.Observe(context.Background(), retry.Event{Kind: retry.EventDone, Attempt: 1, Err: errFlaky, Reason: 200})
	m := collect(t, reader)
	for _, v := range append(want, "unknown") {
		if got, _ := m.counter("retry.call.gave_up", opAttr, reasonAttr(v)); got != 1 {
			t.Errorf("gave_up{reason=%s} = %d, want 1", v, got)
		}
	}
	if retry.ReasonBudget != retry.ReasonAttempts+6 {
		t.Fatalf("retry.Reason constants changed: update the reason table and this test")
	}
}

func TestInstrumentThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp, reader := newMeter(t)
		thr, err := retry.NewThrottle(retry.ThrottleConfig{K: 1, MaxProbability: 1})
		if err != nil {
			t.Fatal(err)
		}
		for range 10000 {
			account.Record(thr, false) // the backend refused everything: reject with p ≈ 0.9999
		}
		p := fast(5)
		p.Throttle = thr
		var seen int64
		p.Observer = retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			if e.Kind == retry.EventThrottled {
				seen++
			}
		})
		p = retryotel.Instrument(p, "op", retryotel.WithMeterProvider(mp))
		op, calls := failing(99, errFlaky)
		retry.Do(t.Context(), p, op)
		m := collect(t, reader)
		got, _ := m.counter("retry.attempt.throttled", opAttr)
		if got != seen || got == 0 {
			t.Errorf("retry.attempt.throttled = %d, the loop reported %d throttled attempts", got, seen)
		}
		if _, sum := m.hist("retry.call.attempts", opAttr); int64(sum) != 5 {
			t.Errorf("attempts = %v, want 5 (throttled attempts count as attempts)", sum)
		}
		if got+calls.Load() != 5 {
			t.Errorf("throttled %d + sent %d != 5 attempts", got, calls.Load())
		}
	})
}

func TestInstrumentSpanEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp, _ := newMeter(t)
		tp, sr := newTracer(t)
		p := retryotel.Instrument(fast(3), "op", retryotel.WithMeterProvider(mp))
		ctx, span := tp.Tracer("test").Start(t.Context(), "call")
		op, _ := failing(9, errFlaky)
		err := retry.Do(ctx, p, op)
		span.End()

		ended := sr.Ended()
		if len(ended) != 1 {
			t.Fatalf("%d spans ended, want only the caller's: Instrument starts none", len(ended))
		}
		var got []string
		for _, e := range ended[0].Events() {
			s := e.Name
			for _, kv := range e.Attributes {
				s += fmt.Sprintf(" %s=%v", kv.Key, kv.Value.Emit())
			}
			got = append(got, s)
		}
		want := []string{
			"retry retry.attempt=1 retry.delay=0.01 error.message=flaky",
			"retry retry.attempt=2 retry.delay=0.02 error.message=flaky",
			"retry.gave_up retry.attempts=3 retry.reason=attempts error.message=" + err.Error(),
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("span events\n got %q\nwant %q", got, want)
		}
		if ended[0].Status().Code != 0 {
			t.Errorf("Instrument set the caller's span status to %v", ended[0].Status())
		}
	})
}

// TestInstrumentSuccessNoEvents: a call that succeeds at once adds no span
// event.
func TestInstrumentSuccessNoEvents(t *testing.T) {
	tp, sr := newTracer(t)
	mp, _ := newMeter(t)
	p := retryotel.Instrument(fast(3), "op", retryotel.WithMeterProvider(mp))
	ctx, span := tp.Tracer("test").Start(t.Context(), "call")
	if err := retry.Do(ctx, p, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	span.End()
	if ev := sr.Ended()[0].Events(); len(ev) != 0 {
		t.Errorf("events on success: %v", ev)
	}
}

// TestInstrumentGlobalMeterProvider: without WithMeterProvider the global
// provider is used.
func TestInstrumentGlobalMeterProvider(t *testing.T) {
	old := otel.GetMeterProvider()
	t.Cleanup(func() { otel.SetMeterProvider(old) })
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	otel.SetMeterProvider(mp)
	p := retryotel.Instrument(fast(3), "op")
	if err := retry.Do(t.Context(), p, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if n, _ := collect(t, reader).hist("retry.call.attempts", opAttr); n != 1 {
		t.Errorf("global provider: retry.call.attempts count %d, want 1", n)
	}
}

// TestInstrumentConcurrent: one instrumented Policy shared by many
// goroutines counts every call (run with -race).
func TestInstrumentConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp, reader := newMeter(t)
		p := retryotel.Instrument(fast(2), "op", retryotel.WithMeterProvider(mp))
		const n = 50
		done := make(chan struct{})
		for i := range n {
			go func() {
				defer func() { done <- struct{}{} }()
				op, _ := failing(i%3, errFlaky) // 0: success, 1: one retry, 2: gives up
				retry.Do(t.Context(), p, op)
			}()
		}
		for range n {
			<-done
		}
		m := collect(t, reader)
		wantGaveUp := int64(0)
		wantAttempts := 0
		for i := range n {
			wantAttempts += min(i%3+1, 2)
			if i%3 == 2 {
				wantGaveUp++
			}
		}
		if cnt, sum := m.hist("retry.call.attempts", opAttr); cnt != n || int(sum) != wantAttempts {
			t.Errorf("attempts: count %d sum %v, want %d and %d", cnt, sum, n, wantAttempts)
		}
		if v, _ := m.counter("retry.call.gave_up", opAttr, reasonAttr("attempts")); v != wantGaveUp {
			t.Errorf("gave_up = %d, want %d", v, wantGaveUp)
		}
	})
}

// A call cancelled during a wait records the time it waited, the part of
// the wait it did not finish included: 10 ms, then 15 ms of 20.
func TestRetryDelayCountsAWaitCutShort(t *testing.T) {
	for _, cancelAt := range []time.Duration{5 * time.Millisecond, 25 * time.Millisecond} {
		synctest.Test(t, func(t *testing.T) {
			mp, reader := newMeter(t)
			p := retryotel.Instrument(fast(5), "op", retryotel.WithMeterProvider(mp))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			time.AfterFunc(cancelAt, cancel)
			start := time.Now()
			if err := retry.Do(ctx, p, func(context.Context) error { return errFlaky }); !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v", err)
			}
			spent := time.Since(start)
			if n, sum := collect(t, reader).hist("retry.call.retry_delay", opAttr); n != 1 || time.Duration(sum*1e9+0.5) != spent {
				t.Fatalf("cancelled at %v: retry.call.retry_delay count %d sum %vs; the call waited %v", cancelAt, n, sum, spent)
			}
		})
	}
}

// Instrumenting a Policy twice counts each call once, under the latest
// operation name, whether the first Instrument's observer is p.Observer
// itself or sits inside a retry.Observers with one of the caller's, which
// keeps seeing every event once.
func TestInstrumentTwiceCountsOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		// first returns the policy before the last Instruments: p,
		// instrumented once, combined with the caller's observer mine.
		first    func(p retry.Policy, mine retry.Observer) retry.Policy
		wantMine int64
	}{
		{"Instrument alone", func(p retry.Policy, _ retry.Observer) retry.Policy { return p }, 0},
		{"inside Observers", func(p retry.Policy, mine retry.Observer) retry.Policy {
			p.Observer = retry.Observers(p.Observer, mine)
			return p
		}, 1},
		{"inside nested Observers", func(p retry.Policy, mine retry.Observer) retry.Policy {
			p.Observer = retry.Observers(mine, retry.Observers(p.Observer, retry.ObserverFunc(func(context.Context, retry.Event) {})))
			return p
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mp, reader := newMeter(t)
				var mine atomic.Int64
				count := retry.ObserverFunc(func(_ context.Context, e retry.Event) {
					if e.Kind == retry.EventDone {
						mine.Add(1)
					}
				})
				p := tc.first(retryotel.Instrument(fast(3), "first", retryotel.WithMeterProvider(mp)), count)
				p = retryotel.Instrument(p, "op", retryotel.WithMeterProvider(mp))
				p = retryotel.Instrument(p, "op", retryotel.WithMeterProvider(mp)) // and a third time
				op, calls := failing(1, errFlaky)
				if err := retry.Do(t.Context(), p, op); err != nil {
					t.Fatal(err)
				}
				c := collect(t, reader)
				if n, sum := c.hist("retry.call.attempts", opAttr); n != 1 || sum != 2 || calls.Load() != 2 {
					t.Errorf("retry.call.attempts{op} = %d calls, sum %v after one call of %d attempts; want 1 call, sum 2", n, sum, calls.Load())
				}
				if n := c.histTotal("retry.call.attempts"); n != 1 {
					t.Errorf("retry.call.attempts has %d calls over all operations, want 1 (an earlier Instrument's observer still records)", n)
				}
				if n := mine.Load(); n != tc.wantMine {
					t.Errorf("the caller's own observer saw EventDone %d times, want %d", n, tc.wantMine)
				}
			})
		})
	}
}
