package retryotel_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/retryotel"
)

// gauge collects r and returns the rejection probability gauge's points
// for retry.throttle = name.
func gauge(t *testing.T, r interface {
	Collect(context.Context, *metricdata.ResourceMetrics) error
}, name string) []float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var got []float64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "retry.throttle.rejection_probability" {
				continue
			}
			if sm.Scope.Name != retryotel.ScopeName || m.Unit != "1" {
				t.Errorf("gauge under scope %q with unit %q", sm.Scope.Name, m.Unit)
			}
			g, ok := m.Data.(metricdata.Gauge[float64])
			if !ok {
				t.Fatalf("retry.throttle.rejection_probability is a %T, want a float64 gauge", m.Data)
			}
			for _, p := range g.DataPoints {
				if v, ok := p.Attributes.Value(retryotel.AttrThrottle); ok && v.AsString() == name {
					got = append(got, p.Value)
				}
			}
		}
	}
	return got
}

// The gauge follows the Throttle: 0 while healthy, the cap after an
// outage, 1 under a forced rejection; nothing once unregistered.
func TestObserveThrottle(t *testing.T) {
	mp, r := newMeter(t)
	th, _ := retry.NewThrottle(retry.ThrottleConfig{})
	reg, err := retryotel.ObserveThrottle(th, "db", retryotel.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	if got := gauge(t, r, "db"); len(got) != 1 || got[0] != 0 {
		t.Fatalf("healthy: %v, want [0]", got)
	}
	for range 100 {
		account.Record(th, false)
	}
	if got := gauge(t, r, "db"); len(got) != 1 || got[0] != 0.9 {
		t.Fatalf("after 100 refusals: %v, want [0.9] (the cap)", got)
	}
	th.Override(retry.ThrottleRejectAll)
	if got := gauge(t, r, "db"); len(got) != 1 || got[0] != 1 {
		t.Fatalf("forced: %v, want [1]", got)
	}
	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
	if got := gauge(t, r, "db"); len(got) != 0 {
		t.Fatalf("unregistered: %v, want nothing", got)
	}
	if _, err := retryotel.ObserveThrottle(nil, "x"); err == nil {
		t.Fatal("nil Throttle accepted")
	}
}
