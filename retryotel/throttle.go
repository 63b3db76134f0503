package retryotel

import (
	"context"
	"errors"

	"github.com/retrykit/retry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// AttrThrottle names the Throttle a gauge of [ObserveThrottle] reports:
// usually the backend it protects.
const AttrThrottle = attribute.Key("retry.throttle")

// ObserveThrottle reports th's state as the asynchronous gauge
// retry.throttle.rejection_probability (unit 1): at each collection,
// th.Probability() (0 while it rejects nothing, 1 while
// Throttle.Override forces every attempt rejected), with retry.throttle =
// name. The meter is taken from WithMeterProvider, or the global
// MeterProvider; other options are ignored.
//
// Call it once per Throttle, beside Instrument: a Throttle serves many
// policies, so the gauge is its own, not an operation's. Unregister the
// returned Registration to stop reporting (until then the MeterProvider
// keeps th). Reading the gauge takes th's window lock briefly, never a
// call's path. It returns an error for a nil th and the MeterProvider's
// errors creating or registering the gauge.
func ObserveThrottle(th *retry.Throttle, name string, opts ...Option) (metric.Registration, error) {
	if th == nil {
		return nil, errors.New("retryotel: ObserveThrottle: nil *retry.Throttle")
	}
	c := newConfig(opts)
	m := c.meterProvider().Meter(ScopeName)
	g, err := m.Float64ObservableGauge("retry.throttle.rejection_probability",
		metric.WithUnit("1"),
		metric.WithDescription("Probability that the retry.Throttle rejects an attempt locally, from 0 (none) to 1 (all)."))
	if err != nil {
		return nil, err
	}
	set := metric.WithAttributeSet(attribute.NewSet(AttrThrottle.String(name)))
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveFloat64(g, th.Probability(), set)
		return nil
	}, g)
}
