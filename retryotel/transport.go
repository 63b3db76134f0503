package retryotel

import (
	"context"
	"net/http"
	"strconv"

	"github.com/retrykit/retry/retryhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// AttrResendCount is the attribute of the stable HTTP semantic conventions
// that numbers the resends of a request, for any reason, redirects
// included: 1 on the first retry or on the first hop after a redirect. It
// is set on the attempt spans of [NewAttemptTransport], never on the first
// request of a call.
const AttrResendCount = attribute.Key("http.request.resend_count")

// NewAttemptTransport returns the Base of a retryhttp.Transport that makes
// each attempt its own client span: it sends every request through
// otelhttp over base, so each attempt is a child of the span in the
// request's context, with its own traceparent on the wire and, after the
// call's first request (retries, hedges and redirect hops alike),
// http.request.resend_count = 1, 2, … It retries nothing: the Transport
// above it does, with all its fields, and its Policy made by [Instrument]
// records the metrics:
//
//	&retryhttp.Transport{
//		Base:   retryotel.NewAttemptTransport(base),
//		Policy: retryotel.Instrument(p, "http"),
//	}
//
// A nil base means http.DefaultTransport. Headers come from the global
// text-map propagator as it is at each attempt; spans from
// WithTracerProvider and otelhttp's HTTP metrics from WithMeterProvider
// (default: the global providers). A retried attempt's span ends when the
// Transport closes its response; the returned response's span ends when
// the caller closes its body, or has ended already if the Transport read
// that body to free the connection for a retry a stop rule then refused.
// Given a base it returned, it builds one layer over that one's base, so
// no attempt gets two spans. CloseIdleConnections reaches base. It is
// safe for concurrent use and should be reused. See the package
// documentation for the layer order and why.
func NewAttemptTransport(base http.RoundTripper, opts ...Option) http.RoundTripper {
	c := newConfig(opts)
	if a, ok := base.(attempts); ok {
		base = a.base
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return attempts{
		RoundTripper: otelhttp.NewTransport(resendCounter{base},
			otelhttp.WithTracerProvider(c.tracerProvider()), otelhttp.WithMeterProvider(c.meterProvider()),
			otelhttp.WithPropagators(globalPropagator{})),
		base: base,
	}
}

// attempts is otelhttp's Transport over the caller's base, with the
// base's CloseIdleConnections, which otelhttp's Transport does not pass
// on: http.Client.CloseIdleConnections reaches retryhttp.Transport, which
// calls it on its Base, this.
type attempts struct {
	http.RoundTripper
	base http.RoundTripper
}

// CloseIdleConnections closes the idle connections of the caller's base,
// if it has such a method.
func (a attempts) CloseIdleConnections() {
	if b, ok := a.base.(interface{ CloseIdleConnections() }); ok {
		b.CloseIdleConnections()
	}
}

// globalPropagator is the global text-map propagator as it is at each use,
// as the global TracerProvider is read when each span starts: otelhttp
// alone keeps the one that was global when its Transport was made. A nil
// global (otel.SetTextMapPropagator(nil)) propagates nothing.
type globalPropagator struct{}

func (globalPropagator) Inject(ctx context.Context, c propagation.TextMapCarrier) {
	if p := otel.GetTextMapPropagator(); p != nil {
		p.Inject(ctx, c)
	}
}

func (globalPropagator) Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	if p := otel.GetTextMapPropagator(); p != nil {
		return p.Extract(ctx, c)
	}
	return ctx
}

func (globalPropagator) Fields() []string {
	if p := otel.GetTextMapPropagator(); p != nil {
		return p.Fields()
	}
	return nil
}

// resendCounter sits under otelhttp, whose attempt span is in the request's
// context: it sets http.request.resend_count to the number of requests
// sent before this one for the same call, as the semantic conventions
// count resends "for any reason, including redirects". Those are the
// earlier attempts of this hop (retryhttp's Retry-Attempt header on the
// request, 2 on the first retry) and every request of the earlier hops
// of a redirect chain (see sentBefore).
type resendCounter struct{ base http.RoundTripper }

func (r resendCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	n := sentBefore(req)
	if v := req.Header.Get(retryhttp.HeaderAttempt); v != "" {
		if a, err := strconv.Atoi(v); err == nil && a > 1 {
			n += a - 1
		}
	}
	if n > 0 {
		trace.SpanFromContext(req.Context()).SetAttributes(AttrResendCount.Int(n))
	}
	resp, err := r.base.RoundTrip(req)
	if resp != nil && resp.Request == nil {
		// The link sentBefore follows to the hops before this one, which
		// http.Transport sets and a custom base may not.
		resp.Request = req
	}
	return resp, err
}

// sentBefore returns how many requests were sent for the hops of a
// redirect chain before req's. http.Client follows redirects above the
// transport, making each hop a new request whose Response field is the
// redirect response that caused it; that response's Request is the
// request of the hop before (set by http.Transport, or by resendCounter),
// and its Retry-Attempt header, which retryhttp.Transport sets on a
// response after more than one attempt, counts the requests sent for
// that hop (retryhttp.Attempts: 1 without it). A first hop has no
// Response: 0.
func sentBefore(req *http.Request) int {
	n := 0
	for resp := req.Response; resp != nil; resp = resp.Request.Response {
		n += retryhttp.Attempts(resp)
		if resp.Request == nil {
			break
		}
	}
	return n
}
