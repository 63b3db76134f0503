package retryotel_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retryotel"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// otelTransport is the composition the package documents: a
// retryhttp.Transport over NewAttemptTransport(base, opts...) whose Policy
// is p instrumented with operation "http" and opts.
func otelTransport(base http.RoundTripper, p retry.Policy, opts ...retryotel.Option) *retryhttp.Transport {
	return &retryhttp.Transport{
		Base:   retryotel.NewAttemptTransport(base, opts...),
		Policy: retryotel.Instrument(p, "http", opts...),
	}
}

// newMeter returns a real SDK MeterProvider with a ManualReader.
func newMeter(t *testing.T) (*sdkmetric.MeterProvider, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	return mp, r
}

// newTracer returns a real SDK TracerProvider that records every span.
func newTracer(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp, sr
}

// collected is one collection of a ManualReader, by metric name.
type collected struct {
	t      *testing.T
	byName map[string]metricdata.Metrics
}

func collect(t *testing.T, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	c := collected{t: t, byName: map[string]metricdata.Metrics{}}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			c.byName[m.Name] = m
		}
	}
	return c
}

func sameAttrs(s attribute.Set, kv []attribute.KeyValue) bool {
	want := attribute.NewSet(kv...)
	return s.Equals(&want)
}

// hist returns the count and sum of the histogram point with exactly the
// attributes kv (zero when there is none).
func (c collected) hist(name string, kv ...attribute.KeyValue) (count uint64, sum float64) {
	c.t.Helper()
	m, ok := c.byName[name]
	if !ok {
		return 0, 0
	}
	switch d := m.Data.(type) {
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			if sameAttrs(p.Attributes, kv) {
				return p.Count, float64(p.Sum)
			}
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if sameAttrs(p.Attributes, kv) {
				return p.Count, p.Sum
			}
		}
	default:
		c.t.Fatalf("%s: not a histogram but %T", name, m.Data)
	}
	return 0, 0
}

// histTotal returns the count of all points of a histogram.
func (c collected) histTotal(name string) uint64 {
	c.t.Helper()
	var n uint64
	switch d := c.byName[name].Data.(type) {
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			n += p.Count
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			n += p.Count
		}
	case nil:
	default:
		c.t.Fatalf("%s: not a histogram but %T", name, d)
	}
	return n
}

// counter returns the value of the Int64Counter point with exactly the
// attributes kv, and the total over all its points.
func (c collected) counter(name string, kv ...attribute.KeyValue) (v, total int64) {
	c.t.Helper()
	m, ok := c.byName[name]
	if !ok {
		return 0, 0
	}
	d, ok := m.Data.(metricdata.Sum[int64])
	if !ok || !d.IsMonotonic {
		c.t.Fatalf("%s: not a monotonic int64 sum but %T", name, m.Data)
	}
	for _, p := range d.DataPoints {
		total += p.Value
		if sameAttrs(p.Attributes, kv) {
			v = p.Value
		}
	}
	return v, total
}
