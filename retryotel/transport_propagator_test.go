package retryotel_test

// The global propagator is read at each attempt, and a nil one propagates
// nothing.

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/retrykit/retry/retryotel"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

type funcRT func(*http.Request) (*http.Response, error)

func (f funcRT) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// otel.SetTextMapPropagator accepts nil and stores it: otel.GetTextMapPropagator
// then returns nil. Before d7c9db3 a transport kept the propagator that was
// global when it was made and went on working; globalPropagator now calls
// Inject on the nil global at every attempt, so every RoundTrip of every
// existing transport panics.
func TestNilGlobalPropagatorAfterNewAttemptTransport(t *testing.T) {
	old := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(old) })

	rt := otelTransport(funcRT(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{}, Request: r,
			Body: io.NopCloser(strings.NewReader("ok"))}, nil
	}), fastHTTP(2), retryotel.WithMeterProvider(noop.NewMeterProvider()),
		retryotel.WithTracerProvider(tracenoop.NewTracerProvider()))

	otel.SetTextMapPropagator(nil) // a test's or an application's teardown, say

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://example.invalid/", nil)
	var panicked any
	func() {
		defer func() { panicked = recover() }()
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
	}()
	if panicked != nil {
		t.Errorf("RoundTrip panicked with a nil global propagator: %v (a nil global should inject nothing)", panicked)
	}
}
