package retryotel_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retryotel"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// printMetrics prints the retry metrics a reader has collected.
func printMetrics(reader sdkmetric.Reader) {
	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != retryotel.ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s %s: %d calls, sum %d", m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Count, p.Sum))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s %s: %d calls", m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Count))
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s %s: %d", m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value))
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s %s: %g", m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value))
				}
			}
		}
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
}

func ExampleInstrument() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	// Instrument once per operation, then use the Policy for every call.
	p := retryotel.Instrument(retry.Policy{MaxAttempts: 3, Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond},
		"fetch", retryotel.WithMeterProvider(mp))

	calls := 0
	err := retry.Do(context.Background(), p, func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("unavailable")
		}
		return nil
	})
	fmt.Println("first call:", err)
	err = retry.Do(context.Background(), p, func(context.Context) error { return errors.New("unavailable") })
	fmt.Println("second call gave up:", err != nil)
	printMetrics(reader)
	// Output:
	// first call: <nil>
	// second call gave up: true
	// retry.call.attempts retry.operation=fetch: 2 calls, sum 6
	// retry.call.gave_up retry.operation=fetch,retry.reason=attempts: 1
	// retry.call.retry_delay retry.operation=fetch: 2 calls
}

func ExampleNewAttemptTransport() {
	// What an application sets up once: a TracerProvider, a MeterProvider
	// and the W3C Trace Context propagator.
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	otel.SetTextMapPropagator(propagation.TraceContext{})

	// A server that answers 503 twice, then 200.
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	base := &http.Transport{}
	defer base.CloseIdleConnections()
	// Retry outside, one span per attempt inside: the attempt layer is the
	// retryhttp.Transport's Base, and Instrument makes its Policy.
	policy := retry.Policy{MaxAttempts: 4, Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond}
	client := &http.Client{Transport: &retryhttp.Transport{
		Base:   retryotel.NewAttemptTransport(base, retryotel.WithTracerProvider(tp), retryotel.WithMeterProvider(mp)),
		Policy: retryotel.Instrument(policy, "load-profile", retryotel.WithMeterProvider(mp)),
	}}
	ctx, span := tp.Tracer("app").Start(context.Background(), "load profile")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	span.End()

	fmt.Println("status:", resp.StatusCode, "after", n.Load(), "requests")
	for _, s := range spans.Ended() {
		if s.SpanKind() != trace.SpanKindClient {
			continue
		}
		resend := "-"
		for _, kv := range s.Attributes() {
			if kv.Key == retryotel.AttrResendCount {
				resend = kv.Value.Emit()
			}
		}
		fmt.Printf("attempt span %q child of the caller's span: %v, resend_count %s\n",
			s.Name(), s.Parent().SpanID() == span.SpanContext().SpanID(), resend)
	}
	printMetrics(reader)
	// Output:
	// status: 200 after 3 requests
	// attempt span "HTTP GET" child of the caller's span: true, resend_count -
	// attempt span "HTTP GET" child of the caller's span: true, resend_count 1
	// attempt span "HTTP GET" child of the caller's span: true, resend_count 2
	// retry.call.attempts retry.operation=load-profile: 1 calls, sum 3
	// retry.call.retry_delay retry.operation=load-profile: 1 calls
}

// A Throttle shared by every call to one backend reports its rejection
// probability as a gauge, here while an operator forces it to reject.
func ExampleObserveThrottle() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	var th retry.Throttle // shared by every Policy that calls the database
	reg, err := retryotel.ObserveThrottle(&th, "db", retryotel.WithMeterProvider(mp))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Unregister()
	printMetrics(reader)
	th.Override(retry.ThrottleRejectAll)
	printMetrics(reader)
	// Output:
	// retry.throttle.rejection_probability retry.throttle=db: 0
	// retry.throttle.rejection_probability retry.throttle=db: 1
}
