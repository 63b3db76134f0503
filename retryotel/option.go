package retryotel

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures [Instrument] and [NewTransport].
type Option interface {
	apply(*config)
}

// config holds the options; its zero value means all defaults.
type config struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

func (c *config) meterProvider() metric.MeterProvider {
	if c.mp != nil {
		return c.mp
	}
	return otel.GetMeterProvider()
}

func (c *config) tracerProvider() trace.TracerProvider {
	if c.tp != nil {
		return c.tp
	}
	return otel.GetTracerProvider()
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithMeterProvider sets the MeterProvider that creates the instruments.
// Nil, or no such option, means the global one, as otel.GetMeterProvider
// returns it when Instrument or NewTransport is called (instruments made
// before the first otel.SetMeterProvider are forwarded to the provider it
// sets, as OpenTelemetry's global provider does). NewTransport also hands
// it to otelhttp for its per-attempt HTTP metrics.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}

// WithTracerProvider sets the TracerProvider of the per-attempt client
// spans that [NewTransport] starts. Nil, or no such option, means the
// global one, as otel.GetTracerProvider returns it when NewTransport is
// called (forwarding to the provider that a later otel.SetTracerProvider
// sets), whatever provider made the caller's span. Instrument starts no spans (it adds events to the span
// already in the call's context), so it does not use this option.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}
