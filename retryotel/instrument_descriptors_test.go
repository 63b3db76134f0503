package retryotel_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryotel"
)

// Every instrument is what the issue names: name, kind, unit, under the
// meter github.com/retrykit/retry/retryotel. One call of each outcome
// makes every instrument report.
func TestInstrumentDescriptors(t *testing.T) {
	mp, r := newMeter(t)
	th, _ := retry.NewThrottle(retry.ThrottleConfig{})
	b, _ := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: -1})
	fail := errors.New("down")
	ctx := context.Background()
	p := retryotel.Instrument(retry.Policy{Initial: retry.Immediate, MaxAttempts: 2}, "op", retryotel.WithMeterProvider(mp))
	retry.Do(ctx, p, func(context.Context) error { return fail }) // attempts, gave up, retry delay
	pt := p
	pt.Throttle = th
	th.Override(retry.ThrottleRejectAll)
	retry.Do(ctx, pt, func(context.Context) error { return nil }) // throttled
	pb := p
	pb.Budget = b
	retry.Do(ctx, pb, func(context.Context) error { return fail }) // budget refused

	var rm metricdata.ResourceMetrics
	if err := r.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	type desc struct{ kind, unit string }
	want := map[string]desc{
		"retry.call.attempts":     {"int64 histogram", "{attempt}"},
		"retry.call.retry_delay":  {"float64 histogram", "s"},
		"retry.call.gave_up":      {"int64 counter", "{call}"},
		"retry.attempt.throttled": {"int64 counter", "{attempt}"},
		"retry.retry.refused":     {"int64 counter", "{retry}"},
	}
	seen := 0
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != retryotel.ScopeName || retryotel.ScopeName != "github.com/retrykit/retry/retryotel" {
			t.Errorf("scope %q (ScopeName %q): want github.com/retrykit/retry/retryotel", sm.Scope.Name, retryotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			w, ok := want[m.Name]
			if !ok {
				t.Errorf("unexpected instrument %q", m.Name)
				continue
			}
			seen++
			var kind string
			switch d := m.Data.(type) {
			case metricdata.Histogram[int64]:
				kind = "int64 histogram"
			case metricdata.Histogram[float64]:
				kind = "float64 histogram"
			case metricdata.Sum[int64]:
				if d.IsMonotonic {
					kind = "int64 counter"
				}
			}
			if kind != w.kind || m.Unit != w.unit {
				t.Errorf("%s: %s (%T) with unit %q, want %s with unit %q", m.Name, kind, m.Data, m.Unit, w.kind, w.unit)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d of the %d instruments reported", seen, len(want))
	}
}

// With the real SDK on, a call that succeeds at once allocates at most one
// object more than without an observer (the bound; it is 0).
func TestInstrumentSuccessAllocations(t *testing.T) {
	mp, _ := newMeter(t)
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	bare := retry.Policy{}
	p := retryotel.Instrument(bare, "op", retryotel.WithMeterProvider(mp))
	retry.Do(ctx, p, op) // the SDK makes its per-attribute-set state at the first record
	without := testing.AllocsPerRun(1000, func() { retry.Do(ctx, bare, op) })
	with := testing.AllocsPerRun(1000, func() { retry.Do(ctx, p, op) })
	if with > without+1 {
		t.Errorf("success with the observer: %v allocations, without: %v; want at most one more", with, without)
	}
}

// Through NewAttemptTransport, attempts a Throttle rejects and retries a Budget
// refuses are counted (retry.attempt.throttled, retry.retry.refused), and
// the throttled ones never reach the server.
func TestTransportThrottledAndRefused(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	mp, r := newMeter(t)
	th, _ := retry.NewThrottle(retry.ThrottleConfig{})
	th.Override(retry.ThrottleRejectAll) // every attempt rejected
	rt := otelTransport(http.DefaultTransport, retry.Policy{Initial: retry.Immediate, MaxAttempts: 5, Throttle: th},
		retryotel.WithMeterProvider(mp))
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	if resp, err := rt.RoundTrip(req); err == nil {
		resp.Body.Close()
		t.Fatal("every attempt throttled, yet a response")
	}
	b, _ := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: -1}) // refuses every retry
	rt = otelTransport(http.DefaultTransport, retry.Policy{Initial: retry.Immediate, MaxAttempts: 5, Budget: b},
		retryotel.WithMeterProvider(mp))
	resp, err := rt.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	c := collect(t, r)
	op := retryotel.AttrOperation.String("http")
	throttled, _ := c.counter("retry.attempt.throttled", op)
	refused, _ := c.counter("retry.retry.refused", op)
	budget, _ := c.counter("retry.call.gave_up", op, retryotel.AttrReason.String("budget"))
	if throttled != 5 || refused != 1 || budget != 1 || hits.Load() != 1 {
		t.Errorf("throttled %d (want 5), refused %d (want 1), gave up on the budget %d (want 1), server hits %d (want 1: only the budget's call)",
			throttled, refused, budget, hits.Load())
	}
}
