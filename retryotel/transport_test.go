package retryotel_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retryotel"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

var httpAttr = retryotel.AttrOperation.String("http")

// seen is what the test server saw of one request.
type seen struct {
	traceparent string
	attempt     string // Retry-Attempt
	query       string
}

// recorder is a loopback server that records every request and answers
// with status(request).
type recorder struct {
	mu   sync.Mutex
	reqs []seen
	srv  *httptest.Server
}

// firstFails answers the first request with code and every other with 200.
func firstFails(code int) func(*http.Request, int) int {
	return func(_ *http.Request, n int) int {
		if n == 1 {
			return code
		}
		return http.StatusOK
	}
}

func newRecorder(t *testing.T, status func(r *http.Request, n int) int) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, seen{r.Header.Get("traceparent"), r.Header.Get(retryhttp.HeaderAttempt), r.URL.RawQuery})
		n := len(rec.reqs)
		rec.mu.Unlock()
		code := status(r, n)
		w.WriteHeader(code)
		io.WriteString(w, http.StatusText(code))
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) seen() []seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]seen(nil), rec.reqs...)
}

// withTraceContext sets the global propagator to W3C Trace Context for the
// test, as an application would.
func withTraceContext(t *testing.T) {
	old := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(old) })
}

// loopback returns a fresh http.Transport whose idle connections are
// closed at the end of the test.
func loopback(t *testing.T) *http.Transport {
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	return base
}

// setup is an instrumented client over a fresh loopback transport, with
// its own SDK providers.
type setup struct {
	client *http.Client
	rt     http.RoundTripper
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
	sr     *tracetest.SpanRecorder
}

func newSetup(t *testing.T, p retry.Policy) setup {
	t.Helper()
	mp, reader := newMeter(t)
	tp, sr := newTracer(t)
	rt := otelTransport(loopback(t), p, retryotel.WithMeterProvider(mp), retryotel.WithTracerProvider(tp))
	return setup{client: &http.Client{Transport: rt}, rt: rt, reader: reader, tp: tp, sr: sr}
}

func fastHTTP(attempts int) retry.Policy {
	return retry.Policy{Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond, Jitter: retry.NoJitter(), MaxAttempts: attempts}
}

// clientSpans returns the spans the transport started, in start order.
func clientSpans(spans []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanKind() == trace.SpanKindClient {
			out = append(out, s)
		}
	}
	return out
}

func startedClientSpans(sr interface {
	Started() []sdktrace.ReadWriteSpan
}) []sdktrace.ReadOnlySpan {
	var ro []sdktrace.ReadOnlySpan
	for _, s := range sr.Started() {
		ro = append(ro, s)
	}
	return clientSpans(ro)
}

func resendCount(s sdktrace.ReadOnlySpan) (int64, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == retryotel.AttrResendCount {
			return kv.Value.AsInt64(), true
		}
	}
	return 0, false
}

// checkAttempts checks the attempt spans against what the server saw:
// one span per request, each a child of parent, the traceparent the
// server received naming that span, distinct per attempt, resend counts
// absent then 1..n-1, Retry-Attempt absent then 2..n.
func checkAttempts(t *testing.T, spans []sdktrace.ReadOnlySpan, reqs []seen, parent trace.SpanContext) {
	t.Helper()
	if len(spans) != len(reqs) {
		t.Fatalf("%d attempt spans for %d requests at the server", len(spans), len(reqs))
	}
	distinct := map[string]bool{}
	for i, s := range spans {
		if s.Parent().SpanID() != parent.SpanID() || s.SpanContext().TraceID() != parent.TraceID() {
			t.Errorf("attempt %d: span parent %v, want the caller's span %v", i+1, s.Parent().SpanID(), parent.SpanID())
		}
		tp := reqs[i].traceparent
		want := "00-" + parent.TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"
		if tp != want {
			t.Errorf("attempt %d: server saw traceparent %q, want %q (its own attempt span)", i+1, tp, want)
		}
		distinct[tp] = true
		rc, ok := resendCount(s)
		switch {
		case i == 0 && ok:
			t.Errorf("first attempt has http.request.resend_count = %d, want it absent", rc)
		case i > 0 && (!ok || rc != int64(i)):
			t.Errorf("attempt %d: http.request.resend_count = %d (set %v), want %d", i+1, rc, ok, i)
		}
		wantHdr := ""
		if i > 0 {
			wantHdr = strconv.Itoa(i + 1)
		}
		if reqs[i].attempt != wantHdr {
			t.Errorf("attempt %d: server saw Retry-Attempt %q, want %q", i+1, reqs[i].attempt, wantHdr)
		}
	}
	if len(distinct) != len(reqs) {
		t.Errorf("%d distinct traceparents for %d attempts", len(distinct), len(reqs))
	}
}

func TestTransportAttemptSpans(t *testing.T) {
	withTraceContext(t)
	rec := newRecorder(t, func(_ *http.Request, n int) int {
		if n <= 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	st := newSetup(t, fastHTTP(4))
	client, reader, tp, sr := st.client, st.reader, st.tp, st.sr

	ctx, parent := tp.Tracer("test").Start(t.Context(), "caller")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rec.srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// The two retried attempts' spans ended when the transport closed
	// their responses; the last one is open until the body is closed.
	if got := len(clientSpans(sr.Ended())); got != 2 {
		t.Errorf("before closing the body: %d attempt spans ended, want the 2 retried ones", got)
	}
	if got := len(startedClientSpans(sr)); got != 3 {
		t.Errorf("%d attempt spans started, want 3", got)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	parent.End()

	reqs := rec.seen()
	if len(reqs) != 3 {
		t.Fatalf("server saw %d requests, want 3", len(reqs))
	}
	spans := clientSpans(sr.Ended())
	checkAttempts(t, spans, reqs, parent.SpanContext())
	for i, s := range spans[:2] {
		if s.EndTime().After(spans[i+1].StartTime()) {
			t.Errorf("attempt %d's span ended after the next attempt started", i+1)
		}
	}

	m := collect(t, reader)
	if n, sum := m.hist("retry.call.attempts", httpAttr); n != 1 || int(sum) != len(reqs) {
		t.Errorf("retry.call.attempts: count %d sum %v, want 1 call and %d attempts (server count)", n, sum, len(reqs))
	}
	if n, _ := m.hist("retry.call.retry_delay", httpAttr); n != 1 {
		t.Errorf("retry.call.retry_delay count %d, want 1", n)
	}
	if _, total := m.counter("retry.call.gave_up"); total != 0 {
		t.Errorf("gave_up = %d for a call that succeeded", total)
	}
	if n := m.histTotal("http.client.request.duration"); n != uint64(len(reqs)) {
		t.Errorf("otelhttp recorded %d attempts, server saw %d", n, len(reqs))
	}
	// The caller's span carries one "retry" event per retry.
	var retries int
	for _, s := range sr.Ended() {
		if s.SpanContext().SpanID() == parent.SpanContext().SpanID() {
			for _, e := range s.Events() {
				if e.Name == "retry" {
					retries++
				}
			}
		}
	}
	if retries != 2 {
		t.Errorf("%d retry events on the caller's span, want 2", retries)
	}
}

// TestTransportGivesUpOnStatus: the last 503 after MaxAttempts comes back
// as a response, and counts as gave_up with reason attempts.
func TestTransportGivesUpOnStatus(t *testing.T) {
	withTraceContext(t)
	rec := newRecorder(t, func(*http.Request, int) int { return http.StatusServiceUnavailable })
	st := newSetup(t, fastHTTP(3))
	client, reader, tp, sr := st.client, st.reader, st.tp, st.sr

	ctx, parent := tp.Tracer("test").Start(t.Context(), "caller")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rec.srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || retryhttp.Attempts(resp) != 3 {
		t.Errorf("status %d after %d attempts, want 503 after 3", resp.StatusCode, retryhttp.Attempts(resp))
	}
	if body, _ := io.ReadAll(resp.Body); string(body) != "Service Unavailable" {
		t.Errorf("body %q: the last response must stay readable", body)
	}
	resp.Body.Close()
	parent.End()

	reqs := rec.seen()
	checkAttempts(t, clientSpans(sr.Ended()), reqs, parent.SpanContext())
	m := collect(t, reader)
	if v, total := m.counter("retry.call.gave_up", httpAttr, reasonAttr("attempts")); v != 1 || total != 1 {
		t.Errorf("gave_up{reason=attempts} = %d (all %d), want 1", v, total)
	}
	if n, sum := m.hist("retry.call.attempts", httpAttr); n != 1 || int(sum) != len(reqs) || len(reqs) != 3 {
		t.Errorf("attempts: count %d sum %v; server saw %d, want 3", n, sum, len(reqs))
	}
}

// TestTransportManyCalls: under concurrent calls, the metrics equal what
// the server counted. The query says how many times a call's request fails.
func TestTransportManyCalls(t *testing.T) {
	withTraceContext(t)
	rec := newRecorder(t, func(r *http.Request, _ int) int {
		fails, _ := strconv.Atoi(r.URL.Query().Get("fail"))
		attempt := 1
		if v := r.Header.Get(retryhttp.HeaderAttempt); v != "" {
			attempt, _ = strconv.Atoi(v)
		}
		if attempt <= fails {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	st := newSetup(t, fastHTTP(3))
	client, reader, sr := st.client, st.reader, st.sr

	const calls = 40
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			resp, err := client.Get(rec.srv.URL + "/?fail=" + strconv.Itoa(i%4))
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	wg.Wait()

	reqs := rec.seen()
	var gaveUp int64
	for _, r := range reqs {
		if r.query == "fail=3" && r.attempt == "3" {
			gaveUp++
		}
	}
	m := collect(t, reader)
	if n, sum := m.hist("retry.call.attempts", httpAttr); n != calls || int(sum) != len(reqs) {
		t.Errorf("attempts: %d calls, %v attempts; want %d calls and the server's %d requests", n, sum, calls, len(reqs))
	}
	if v, _ := m.counter("retry.call.gave_up", httpAttr, reasonAttr("attempts")); v != gaveUp || gaveUp != calls/4 {
		t.Errorf("gave_up = %d; the server answered %d calls' last attempt with 503, want %d", v, gaveUp, calls/4)
	}
	if n, _ := m.hist("retry.call.retry_delay", httpAttr); n != 3*calls/4 {
		t.Errorf("retry_delay recorded %d times, want %d (calls that retried)", n, 3*calls/4)
	}
	if got := len(clientSpans(sr.Ended())); got != len(reqs) {
		t.Errorf("%d attempt spans ended, server saw %d requests", got, len(reqs))
	}
	// No caller span: each attempt's span is the root of a trace of its
	// own, and every attempt sent its own traceparent.
	distinct := map[string]bool{}
	for _, r := range reqs {
		distinct[r.traceparent] = true
	}
	if len(distinct) != len(reqs) || distinct[""] {
		t.Errorf("%d distinct traceparents for %d requests", len(distinct), len(reqs))
	}
}

// TestTransportConnectionError: a transport error ends every attempt span
// with an error status, and giving up counts with reason attempts.
func TestTransportConnectionError(t *testing.T) {
	withTraceContext(t)
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more: connection refused
	st := newSetup(t, fastHTTP(3))
	client, reader, sr := st.client, st.reader, st.sr
	resp, err := client.Get(url)
	if err == nil {
		resp.Body.Close()
		t.Fatal("no error from a closed port")
	}
	spans := clientSpans(sr.Ended())
	if len(spans) != 3 {
		t.Fatalf("%d attempt spans, want 3", len(spans))
	}
	for i, s := range spans {
		if s.Status().Code.String() != "Error" {
			t.Errorf("attempt %d: status %v, want Error", i+1, s.Status())
		}
		if rc, ok := resendCount(s); ok != (i > 0) || ok && rc != int64(i) {
			t.Errorf("attempt %d: resend_count %d (set %v)", i+1, rc, ok)
		}
	}
	if v, _ := collect(t, reader).counter("retry.call.gave_up", httpAttr, reasonAttr("attempts")); v != 1 {
		t.Errorf("gave_up{attempts} = %d, want 1 (err %v)", v, err)
	}
}

// TestTransportNilBaseAndGlobalProviders: nil base means
// http.DefaultTransport; no options means the global providers, even when
// the caller's span comes from another TracerProvider (otelhttp alone
// would start the attempt spans on that one).
func TestTransportNilBaseAndGlobalProviders(t *testing.T) {
	withTraceContext(t)
	rec := newRecorder(t, firstFails(http.StatusBadGateway))
	mp, reader := newMeter(t)
	tp, sr := newTracer(t)
	oldMP, oldTP := otel.GetMeterProvider(), otel.GetTracerProvider()
	otel.SetMeterProvider(mp)
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetMeterProvider(oldMP)
		otel.SetTracerProvider(oldTP)
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	})
	client := &http.Client{Transport: otelTransport(nil, fastHTTP(3))}
	callerTP, callerSR := newTracer(t)
	ctx, span := callerTP.Tracer("app").Start(t.Context(), "caller")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rec.srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	span.End()
	if got, other := len(clientSpans(sr.Ended())), len(clientSpans(callerSR.Ended())); got != 2 || other != 0 {
		t.Errorf("%d attempt spans on the global tracer provider, %d on the caller's; want 2 and 0", got, other)
	}
	if _, sum := collect(t, reader).hist("retry.call.attempts", httpAttr); sum != 2 {
		t.Errorf("attempts on the global meter provider = %v, want 2", sum)
	}

	// A global TracerProvider set after NewAttemptTransport, a second one, is the
	// one the next attempt spans come from.
	tp2, sr2 := newTracer(t)
	otel.SetTracerProvider(tp2)
	resp, err = client.Get(rec.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if before, after := len(clientSpans(sr.Ended())), len(clientSpans(sr2.Ended())); before != 2 || after != 1 {
		t.Errorf("after otel.SetTracerProvider: %d attempt spans on the replaced provider (2 before), %d on the new one; want 2 and 1", before, after)
	}
}

// TestTransportKeepsRequest: the caller's request is not modified (no
// traceparent or Retry-Attempt added to its headers).
func TestTransportKeepsRequest(t *testing.T) {
	withTraceContext(t)
	rec := newRecorder(t, firstFails(http.StatusServiceUnavailable))
	st := newSetup(t, fastHTTP(3))
	rt, tp := st.rt, st.tp
	ctx, parent := tp.Tracer("test").Start(context.Background(), "caller")
	defer parent.End()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, rec.srv.URL, strings.NewReader("payload"))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(req.Header) != 0 {
		t.Errorf("caller's request headers modified: %v", req.Header)
	}
	if len(rec.seen()) != 2 {
		t.Errorf("server saw %d requests, want 2", len(rec.seen()))
	}
}

// TestTransportAttemptTimeout: an attempt cut short by the policy's
// AttemptTimeout is its own ended span with an error, and the retry that
// follows has resend_count 1.
func TestTransportAttemptTimeout(t *testing.T) {
	withTraceContext(t)
	rec := newRecorder(t, func(r *http.Request, n int) int {
		if n == 1 {
			select { // stall until the client gives up on this attempt
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
		}
		return http.StatusOK
	})
	p := fastHTTP(3)
	p.AttemptTimeout = 50 * time.Millisecond
	st := newSetup(t, p)
	client, reader, tp, sr := st.client, st.reader, st.tp, st.sr
	ctx, parent := tp.Tracer("test").Start(t.Context(), "caller")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rec.srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body, err := io.ReadAll(resp.Body); err != nil || string(body) != "OK" {
		t.Errorf("body %q, %v: the body must stay readable after the attempt timeout", body, err)
	}
	resp.Body.Close()
	parent.End()

	spans := clientSpans(sr.Ended())
	reqs := rec.seen()
	checkAttempts(t, spans, reqs, parent.SpanContext())
	if len(spans) == 2 && spans[0].Status().Code.String() != "Error" {
		t.Errorf("timed-out attempt's span status %v, want Error", spans[0].Status())
	}
	m := collect(t, reader)
	if _, sum := m.hist("retry.call.attempts", httpAttr); int(sum) != len(reqs) || len(reqs) != 2 {
		t.Errorf("attempts %v, server saw %d, want 2", sum, len(reqs))
	}
	if _, total := m.counter("retry.call.gave_up"); total != 0 {
		t.Errorf("gave_up = %d", total)
	}
}

// TestTransportNotRetriedPOST: a POST without an idempotency key that gets
// a 503 is not retried; the call counts as given up with reason permanent
// (the transport's loop saw a final, non-retryable answer).
func TestTransportNotRetriedPOST(t *testing.T) {
	withTraceContext(t)
	rec := newRecorder(t, func(*http.Request, int) int { return http.StatusServiceUnavailable })
	st := newSetup(t, fastHTTP(3))
	client, reader, sr := st.client, st.reader, st.sr
	resp, err := client.Post(rec.srv.URL, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || len(rec.seen()) != 1 {
		t.Fatalf("status %d after %d requests, want 503 after 1", resp.StatusCode, len(rec.seen()))
	}
	if n := len(clientSpans(sr.Ended())); n != 1 {
		t.Errorf("%d attempt spans, want 1", n)
	}
	m := collect(t, reader)
	if _, sum := m.hist("retry.call.attempts", httpAttr); sum != 1 {
		t.Errorf("attempts %v, want 1", sum)
	}
	if v, total := m.counter("retry.call.gave_up", httpAttr, reasonAttr("permanent")); v != 1 || total != 1 {
		t.Errorf("gave_up{permanent} = %d (all %d), want 1", v, total)
	}
}

// A Retry-Attempt header already in the caller's request (a proxy's copy
// of its inbound headers) does not make the first attempt a resend.
func TestTransportCallerAttemptHeader(t *testing.T) {
	withTraceContext(t)
	rec := newRecorder(t, firstFails(http.StatusServiceUnavailable))
	st := newSetup(t, fastHTTP(3))
	req, _ := http.NewRequest(http.MethodGet, rec.srv.URL, nil)
	req.Header.Set(retryhttp.HeaderAttempt, "3")
	resp, err := st.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	spans := clientSpans(st.sr.Ended())
	if len(spans) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(spans))
	}
	var counts []int64
	for _, s := range spans {
		if n, ok := resendCount(s); ok {
			counts = append(counts, n)
		} else {
			counts = append(counts, 0)
		}
	}
	if !slices.Equal(counts, []int64{0, 1}) {
		t.Errorf("http.request.resend_count %v (0: absent); want absent, then 1", counts)
	}
}

// The composition: NewAttemptTransport as a retryhttp.Transport's Base and
// Instrument for its Policy. The Transport's own fields keep their meaning
// (RetryStatus retries a 418 that the default would not), the operation is
// the caller's, and an instrumented Policy instrumented again, or an
// attempt layer given as the base of another, count and trace each attempt
// once: one client span and one otelhttp point per request the server saw,
// one retry.call.attempts point per call.
func TestComposedTransportCountsOnce(t *testing.T) {
	withTraceContext(t)
	rec := newRecorder(t, firstFails(http.StatusTeapot))
	mp, reader := newMeter(t)
	tp, sr := newTracer(t)
	opts := []retryotel.Option{retryotel.WithMeterProvider(mp), retryotel.WithTracerProvider(tp)}
	p := retryotel.Instrument(fastHTTP(3), "profile", opts...)
	rt := &retryhttp.Transport{
		Base:        retryotel.NewAttemptTransport(retryotel.NewAttemptTransport(loopback(t), opts...), opts...),
		Policy:      retryotel.Instrument(p, "profile", opts...),
		RetryStatus: func(code int) bool { return code == http.StatusTeapot },
	}
	resp, err := (&http.Client{Transport: rt}).Get(rec.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	reqs := rec.seen()
	if resp.StatusCode != http.StatusOK || len(reqs) != 2 {
		t.Fatalf("status %d after %d requests, want 200 after 2 (RetryStatus retries the 418)", resp.StatusCode, len(reqs))
	}
	if n := len(clientSpans(sr.Ended())); n != len(reqs) {
		t.Errorf("%d client spans for %d requests, want one each", n, len(reqs))
	}
	c := collect(t, reader)
	if n := c.histTotal("http.client.request.duration"); n != uint64(len(reqs)) {
		t.Errorf("otelhttp recorded %d attempts, the server saw %d", n, len(reqs))
	}
	profile := retryotel.AttrOperation.String("profile")
	if n, sum := c.hist("retry.call.attempts", profile); n != 1 || sum != 2 {
		t.Errorf("retry.call.attempts{profile} = %d calls, sum %v; want 1 call, sum 2", n, sum)
	}
	if n := c.histTotal("retry.call.attempts"); n != 1 {
		t.Errorf("retry.call.attempts has %d calls in all, want 1", n)
	}
}
