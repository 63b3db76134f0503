package retryotel

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// Option configures [Instrument], [NewAttemptTransport] and [ObserveThrottle].
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
	return globalTracerProvider{}
}

// globalTracerProvider is the global TracerProvider as it is when each
// span starts (otel.GetTracerProvider), so that a provider set after
// NewAttemptTransport, even a second one, is used, as otelhttp does by itself for
// requests without a parent span.
type globalTracerProvider struct{ embedded.TracerProvider }

func (globalTracerProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return globalTracer{name: name, opts: opts}
}

type globalTracer struct {
	embedded.Tracer
	name string
	opts []trace.TracerOption
}

func (t globalTracer) Start(ctx context.Context, spanName string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return otel.GetTracerProvider().Tracer(t.name, t.opts...).Start(ctx, spanName, opts...)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithMeterProvider sets the MeterProvider that creates the instruments.
// Nil, or no such option, means the global one, as otel.GetMeterProvider
// returns it when Instrument, NewAttemptTransport or ObserveThrottle is called (instruments
// made before the first otel.SetMeterProvider are forwarded to the provider
// it sets, as OpenTelemetry's global provider does). NewAttemptTransport
// hands it to otelhttp for its per-attempt HTTP metrics.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}

// WithTracerProvider sets the TracerProvider of the per-attempt client
// spans that [NewAttemptTransport] starts. Nil, or no such option, means the
// global one, as otel.GetTracerProvider returns it when each span starts,
// whatever provider made the caller's span. Instrument starts no spans (it adds events to the span
// already in the call's context), so it does not use this option.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}
