package retryotel_test

// Tests of promises that a hostile review found broken (each failed before
// its fix): each names the documented promise it checks.

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retryotel"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
)

// idleCountingBase is a base RoundTripper that counts the calls of its
// CloseIdleConnections method.
type idleCountingBase struct {
	*http.Transport
	closes atomic.Int32
}

func (b *idleCountingBase) CloseIdleConnections() {
	b.closes.Add(1)
	b.Transport.CloseIdleConnections()
}

// NewAttemptTransport: "Its CloseIdleConnections, which the
// retryhttp.Transport's calls, closes the idle connections of base". The
// layer is otelhttp's Transport over an unexported resendCounter, and
// neither has a CloseIdleConnections method: without the layer's own, the
// call never reached the caller's base, so its keep-alive connections
// stayed open.
func TestTransportCloseIdleConnectionsReachesBase(t *testing.T) {
	var closed atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	base := &idleCountingBase{Transport: &http.Transport{}}
	t.Cleanup(base.Transport.CloseIdleConnections) // for goleak, whatever happens
	client := &http.Client{Transport: otelTransport(base, fastHTTP(3),
		retryotel.WithMeterProvider(noop.NewMeterProvider()))}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // the connection goes back to base's idle pool

	client.CloseIdleConnections()
	if n := base.closes.Load(); n != 1 {
		t.Errorf("http.Client.CloseIdleConnections reached the base's CloseIdleConnections %d times, want 1", n)
	}
	deadline := time.Now().Add(time.Second)
	for closed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if closed.Load() == 0 {
		t.Errorf("after client.CloseIdleConnections the idle keep-alive connection is still open at the server")
	}
}

// doc.go: "each attempt carries the headers of the global propagator
// (otel.GetTextMapPropagator; with propagation.TraceContext, a
// traceparent per attempt ...)"; NewAttemptTransport: "Headers are injected with
// the global text-map propagator (set one with otel.SetTextMapPropagator
// ...)". The transport snapshots the propagator that is global when
// NewAttemptTransport runs (otelhttp's default option): once a propagator has
// been set, replacing it later has no effect on the transport, unlike the
// TracerProvider, which the package resolves "when each span starts".
func TestTransportPropagatorReadPerAttempt(t *testing.T) {
	old := otel.GetTextMapPropagator()
	t.Cleanup(func() { otel.SetTextMapPropagator(old) })
	otel.SetTextMapPropagator(propagation.Baggage{}) // what a library or an earlier setup installed

	rec := newRecorder(t, func(*http.Request, int) int { return http.StatusOK })
	st := newSetup(t, fastHTTP(3))
	otel.SetTextMapPropagator(propagation.TraceContext{}) // the application's choice, after the client was built

	resp, err := st.client.Get(rec.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	spans := clientSpans(st.sr.Ended())
	reqs := rec.seen()
	if len(spans) != 1 || len(reqs) != 1 {
		t.Fatalf("%d spans, %d requests; want 1 and 1", len(spans), len(reqs))
	}
	want := "00-" + spans[0].SpanContext().TraceID().String() + "-" + spans[0].SpanContext().SpanID().String() + "-01"
	if reqs[0].traceparent != want {
		t.Errorf("the server saw traceparent %q, want %q: the global propagator at the time of the request (TraceContext) was not used", reqs[0].traceparent, want)
	}
}

// Instrument's Policy under a retryhttp.Transport: "a call that gives up counts in retry.call.gave_up,
// including one that ends on a retryable status after MaxAttempts (the
// last 503 is returned as a response with a nil error; it counts with
// retry.reason = attempts)". When that last 503 carries a Retry-After
// longer than MaxServerWait, judge marks it Permanent before the attempt
// limit is considered, and the call counts with reason permanent.
func TestTransportLastRetryAfterCountsAsAttempts(t *testing.T) {
	withTraceContext(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(retryhttp.HeaderAttempt) == "3" {
			w.Header().Set("Retry-After", "3600") // more than DefaultMaxServerWait
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	st := newSetup(t, fastHTTP(3))
	resp, err := st.client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || retryhttp.Attempts(resp) != 3 || !retryhttp.Exhausted(resp) {
		t.Fatalf("status %d after %d attempts (exhausted %v), want the third 503, exhausted",
			resp.StatusCode, retryhttp.Attempts(resp), retryhttp.Exhausted(resp))
	}
	m := collect(t, st.reader)
	attempts, total := m.counter("retry.call.gave_up", httpAttr, reasonAttr("attempts"))
	permanent, _ := m.counter("retry.call.gave_up", httpAttr, reasonAttr("permanent"))
	if attempts != 1 || total != 1 {
		t.Errorf("gave_up{reason=attempts} = %d, {reason=permanent} = %d (all %d); want attempts = 1 for a call that ended on a 503 after MaxAttempts",
			attempts, permanent, total)
	}
}

// nilMeterProvider is a MeterProvider whose synchronous instruments fail
// to be created: it reports an error and returns no instrument.
type nilMeterProvider struct{ noop.MeterProvider }

func (nilMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return nilMeter{} }

type nilMeter struct{ noop.Meter }

var errNoInstrument = errors.New("no instrument")

func (nilMeter) Int64Histogram(string, ...metric.Int64HistogramOption) (metric.Int64Histogram, error) {
	return nil, errNoInstrument
}
func (nilMeter) Float64Histogram(string, ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return nil, errNoInstrument
}
func (nilMeter) Int64Counter(string, ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return nil, errNoInstrument
}

// Instrument: "Errors creating instruments go to otel.Handle; the
// instruments OpenTelemetry returns with them are used as they are." The
// metric API does not promise a non-nil instrument with an error; a
// provider that returns (nil, err) makes Instrument succeed and then every
// retry.Do call panic in the observer: telemetry failure takes the
// application down instead of going to otel.Handle.
func TestInstrumentWithoutInstruments(t *testing.T) {
	var handled atomic.Int32
	oldHandler := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) { handled.Add(1) }))
	t.Cleanup(func() { otel.SetErrorHandler(oldHandler) })

	p := retryotel.Instrument(fast(3), "op", retryotel.WithMeterProvider(nilMeterProvider{}))
	if handled.Load() == 0 {
		t.Errorf("instrument creation errors did not reach otel.Handle")
	}
	var err error
	panicked := func() (v any) {
		defer func() { v = recover() }()
		err = retry.Do(context.Background(), p, func(context.Context) error { return nil })
		return nil
	}()
	if panicked != nil {
		t.Fatalf("retry.Do panicked in the observer after instrument creation failed: %v", panicked)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// retry.Observer: "Observe is called ... with the context of the call
// (for EventAttempt, the attempt's own context when the policy has an
// AttemptTimeout)"; retryhttp.Transport: "an attempt timeout bounds it and
// the Observer and Logger see it, exactly as in retry.Do". retry.Do hands
// EventAttempt the attempt's context, which ends when the attempt times
// out; the Transport (and so the composition with NewAttemptTransport) clears AttemptTimeout in the
// loop's policy and applies it itself, so EventAttempt gets the call's
// context, which the attempt's timeout never ends.
func TestTransportAttemptEventContext(t *testing.T) {
	withTraceContext(t)
	const timeout = 50 * time.Millisecond
	observe := func(ctxs *[]context.Context) retry.Policy {
		p := fastHTTP(3)
		p.AttemptTimeout = timeout
		p.Observer = retry.ObserverFunc(func(ctx context.Context, e retry.Event) {
			if e.Kind == retry.EventAttempt {
				*ctxs = append(*ctxs, ctx)
			}
		})
		return p
	}

	// retry.Do, for reference: attempt 1 runs out of its timeout.
	var doCtxs []context.Context
	var first atomic.Bool
	retry.Do(t.Context(), observe(&doCtxs), func(ctx context.Context) error {
		if first.CompareAndSwap(false, true) {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	if len(doCtxs) != 2 || !errors.Is(doCtxs[0].Err(), context.DeadlineExceeded) {
		t.Fatalf("retry.Do: EventAttempt contexts %v; want 2, the first ended by its timeout", doCtxs)
	}

	// The same policy through the composed Transport: attempt 1 stalls past its timeout.
	rec := newRecorder(t, func(r *http.Request, n int) int {
		if n == 1 {
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
		}
		return http.StatusOK
	})
	var httpCtxs []context.Context
	st := newSetup(t, observe(&httpCtxs))
	resp, err := st.client.Get(rec.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(httpCtxs) != 2 {
		t.Fatalf("composed Transport: %d EventAttempt events, want 2", len(httpCtxs))
	}
	if err := httpCtxs[0].Err(); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		t.Errorf("composed Transport: the context EventAttempt 1 received is still live (Err %v) after that attempt timed out; retry.Do hands the attempt's own context, ended by its timeout", err)
	}
}
