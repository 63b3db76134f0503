package retryotel_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retryotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
)

// Benchmarks of the success path (the operation succeeds at the first
// attempt) without an observer (none), with the OpenTelemetry observer on
// the real SDK with a ManualReader (otel), and with the observer on the
// no-op MeterProvider (otel-noop: the observer's own cost without the
// SDK's). Compare the observer= columns side by side:
//
//	go test -run '^$' -bench 'Success|HistogramRecord' -benchmem -count 10 . > bench.txt
//	go tool benchstat -col /observer bench.txt   (benchstat: golang.org/x/perf, a tool of ../bench)

// loop runs f b.N times through b.Loop and reports, besides the wall time,
// the process CPU time per operation (cpu-ns/op).
func loop(b *testing.B, f func()) {
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		f()
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

func benchMeter(b *testing.B) *sdkmetric.MeterProvider {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { mp.Shutdown(context.Background()) })
	return mp
}

func BenchmarkDoSuccess(b *testing.B) {
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	run := func(b *testing.B, p retry.Policy) {
		loop(b, func() {
			if err := retry.Do(ctx, p, op); err != nil {
				b.Fatal(err)
			}
		})
	}
	b.Run("observer=none", func(b *testing.B) { run(b, retry.Policy{}) })
	b.Run("observer=otel", func(b *testing.B) {
		run(b, retryotel.Instrument(retry.Policy{}, "op", retryotel.WithMeterProvider(benchMeter(b))))
	})
	b.Run("observer=otel-noop", func(b *testing.B) {
		run(b, retryotel.Instrument(retry.Policy{}, "op", retryotel.WithMeterProvider(noop.NewMeterProvider())))
	})
}

func BenchmarkDoValueSuccess(b *testing.B) {
	ctx := context.Background()
	op := func(context.Context) (int, error) { return 1, nil }
	run := func(b *testing.B, p retry.Policy) {
		loop(b, func() {
			if _, err := retry.DoValue(ctx, p, op); err != nil {
				b.Fatal(err)
			}
		})
	}
	b.Run("observer=none", func(b *testing.B) { run(b, retry.Policy{}) })
	b.Run("observer=otel", func(b *testing.B) {
		run(b, retryotel.Instrument(retry.Policy{}, "op", retryotel.WithMeterProvider(benchMeter(b))))
	})
	b.Run("observer=otel-noop", func(b *testing.B) {
		run(b, retryotel.Instrument(retry.Policy{}, "op", retryotel.WithMeterProvider(noop.NewMeterProvider())))
	})
}

// memBase answers every request with 200 from memory.
type memBase struct{}

func (memBase) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(""))}, nil
}

// BenchmarkTransportSuccess: a retryhttp.Transport over an in-memory base,
// its policy without and with the observer (no spans: the cost of the
// metrics alone on the HTTP path).
func BenchmarkTransportSuccess(b *testing.B) {
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	run := func(b *testing.B, rt http.RoundTripper) {
		loop(b, func() {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		})
	}
	b.Run("observer=none", func(b *testing.B) { run(b, &retryhttp.Transport{Base: memBase{}}) })
	b.Run("observer=otel", func(b *testing.B) {
		p := retryotel.Instrument(retry.Policy{}, "http", retryotel.WithMeterProvider(benchMeter(b)))
		run(b, &retryhttp.Transport{Base: memBase{}, Policy: p})
	})
}

// BenchmarkHistogramRecord is the reference: one Record on the SDK's
// Int64Histogram with a precomputed attribute set, which is what the
// observer adds to a call that succeeds at once.
func BenchmarkHistogramRecord(b *testing.B) {
	ctx := context.Background()
	h, err := benchMeter(b).Meter("bench").Int64Histogram("h")
	if err != nil {
		b.Fatal(err)
	}
	opts := []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(retryotel.AttrOperation.String("op")))}
	loop(b, func() { h.Record(ctx, 1, opts...) })
}

// BenchmarkCounterAdd is a second reference: one Add on the SDK's
// Int64Counter, the cheapest synchronous instrument, with a precomputed
// attribute set, with the SDK's default exemplar filter and with exemplars
// off (sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter)).
func BenchmarkCounterAdd(b *testing.B) {
	ctx := context.Background()
	for _, ex := range []string{"on", "off"} {
		b.Run("exemplars="+ex, func(b *testing.B) {
			opts := []sdkmetric.Option{sdkmetric.WithReader(sdkmetric.NewManualReader())}
			if ex == "off" {
				opts = append(opts, sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
			}
			mp := sdkmetric.NewMeterProvider(opts...)
			b.Cleanup(func() { mp.Shutdown(context.Background()) })
			c, err := mp.Meter("bench").Int64Counter("c")
			if err != nil {
				b.Fatal(err)
			}
			add := []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(retryotel.AttrOperation.String("op")))}
			loop(b, func() { c.Add(ctx, 1, add...) })
		})
	}
}
