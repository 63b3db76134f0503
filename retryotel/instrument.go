package retryotel

import (
	"context"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope (meter) name of the metrics.
const ScopeName = "github.com/retrykit/retry/retryotel"

// Attribute keys of the metrics and span events.
const (
	// AttrOperation names the operation a Policy was instrumented for.
	AttrOperation = attribute.Key("retry.operation")
	// AttrReason says why a call gave up (retry.call.gave_up).
	AttrReason = attribute.Key("retry.reason")
	// AttrHint names the server hint that set a retry's wait, on a "retry"
	// span event (a retryhttp.Transport's, when a hint was longer than the
	// policy's wait): the field and the value read, as
	// retryhttp.Hint.String gives them ("RateLimit t=2").
	AttrHint = attribute.Key("retry.hint")
)

// reasonValues holds the retry.reason value of each retry.Reason, indexed
// by the Reason.
var reasonValues = [...]string{
	retry.ReasonAttempts:   "attempts",
	retry.ReasonPermanent:  "permanent",
	retry.ReasonExhausted:  "exhausted",
	retry.ReasonTimeBudget: "time_budget",
	retry.ReasonDeadline:   "deadline",
	retry.ReasonContext:    "context",
	retry.ReasonBudget:     "budget",
}

// reasonValue returns the retry.reason value of r ("unknown" for a Reason
// this package does not know).
func reasonValue(r retry.Reason) string {
	if int(r) < len(reasonValues) && reasonValues[r] != "" {
		return reasonValues[r]
	}
	return "unknown"
}

// Instrument returns p with an Observer that records retrykit's metrics
// (see the package documentation) with retry.operation = operation, and
// adds "retry", "retry.throttled", "retry.budget_refused" and
// "retry.gave_up" events to the recording span in the call's context, if
// any. p's own Observer, when set, is kept and called first (see
// retry.Observers); nothing else in p changes. The meter is taken from
// WithMeterProvider, or the global MeterProvider.
//
// Instrument builds the instruments and attribute sets once: call it once
// per operation and reuse the Policy, not once per call. The returned
// Policy is a plain value, safe for concurrent use like any Policy.
// Errors creating instruments go to otel.Handle; the instruments
// OpenTelemetry returns with them are used as they are, and an instrument
// a MeterProvider does not return at all records nothing.
//
// Instrumenting twice never counts twice: Instrument replaces the
// observer that an earlier Instrument put in p, found in p.Observer
// itself or inside a retry.Observers of it, so the Policy records each
// call once, under the latest operation name and MeterProvider, and p's
// other observers keep their order. (An observer of yours that wraps an
// instrumented one in some other way hides it.)
func Instrument(p retry.Policy, operation string, opts ...Option) retry.Policy {
	c := newConfig(opts)
	prev := p.Observer
	if holdsOurs(prev) {
		prev = retry.Observers(withoutOurs(prev, nil)...)
	}
	p.Observer = retry.Observers(prev, newObserver(operation, c.meterProvider()))
	return p
}

// unwrapper is the Observer of retry.Observers, which passes every event
// to each of the observers it returns.
type unwrapper interface{ Unwrap() []retry.Observer }

// holdsOurs reports whether o is, or passes events through
// retry.Observers to, an observer that Instrument installed.
func holdsOurs(o retry.Observer) bool {
	switch o := o.(type) {
	case *observer:
		return true
	case unwrapper:
		for _, x := range o.Unwrap() {
			if holdsOurs(x) {
				return true
			}
		}
	}
	return false
}

// withoutOurs appends to list the observers that o passes events to,
// flattening retry.Observers, except those that Instrument installed.
func withoutOurs(o retry.Observer, list []retry.Observer) []retry.Observer {
	switch o := o.(type) {
	case nil, *observer:
	case unwrapper:
		for _, x := range o.Unwrap() {
			list = withoutOurs(x, list)
		}
	default:
		list = append(list, o)
	}
	return list
}

// observer is the retry.Observer that Instrument installs. All its fields
// are set by newObserver and never change: it is safe for concurrent use.
type observer struct {
	attempts  metric.Int64Histogram
	delay     metric.Float64Histogram
	gaveUp    metric.Int64Counter
	throttled metric.Int64Counter
	refused   metric.Int64Counter
	hedges    hedgeCounters

	operation attribute.KeyValue
	// Options holding the precomputed attribute sets, as slices so that
	// passing them with ... allocates nothing.
	record     []metric.RecordOption
	add        []metric.AddOption
	reasonAdds [len(reasonValues)][]metric.AddOption
}

// Histogram boundaries: attempts are small integers; the total wait of a
// call ranges from milliseconds to minutes (the reference schedule waits
// 1, 3, 7, … 31 s in total before retries 1 to 5).
var (
	attemptBounds = []float64{1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 20, 32, 64}
	delayBounds   = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
)

func newObserver(operation string, mp metric.MeterProvider) *observer {
	m := mp.Meter(ScopeName)
	o := &observer{operation: AttrOperation.String(operation)}
	var err error
	o.attempts, err = m.Int64Histogram("retry.call.attempts",
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts made per call, the first included (1 = success at the first try)."),
		metric.WithExplicitBucketBoundaries(attemptBounds...))
	if handle(err); o.attempts == nil {
		o.attempts = noop.Int64Histogram{}
	}
	o.delay, err = m.Float64Histogram("retry.call.retry_delay",
		metric.WithUnit("s"),
		metric.WithDescription("Total time a call spent waiting between its attempts (a call that retried, or whose context ended while it waited)."),
		metric.WithExplicitBucketBoundaries(delayBounds...))
	if handle(err); o.delay == nil {
		o.delay = noop.Float64Histogram{}
	}
	o.gaveUp, err = m.Int64Counter("retry.call.gave_up",
		metric.WithUnit("{call}"),
		metric.WithDescription("Calls that gave up without success, by retry.reason."))
	if handle(err); o.gaveUp == nil {
		o.gaveUp = noop.Int64Counter{}
	}
	o.throttled, err = m.Int64Counter("retry.attempt.throttled",
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts rejected locally by a retry.Throttle, not sent."))
	if handle(err); o.throttled == nil {
		o.throttled = noop.Int64Counter{}
	}
	o.refused, err = m.Int64Counter("retry.retry.refused",
		metric.WithUnit("{retry}"),
		metric.WithDescription("Retries refused by a retry.Budget."))
	if handle(err); o.refused == nil {
		o.refused = noop.Int64Counter{}
	}

	o.hedges = newHedgeCounters(m)

	set := metric.WithAttributeSet(attribute.NewSet(o.operation))
	o.record = []metric.RecordOption{set}
	o.add = []metric.AddOption{set}
	for r := range reasonValues {
		if reasonValues[r] == "" {
			continue
		}
		o.reasonAdds[r] = []metric.AddOption{metric.WithAttributeSet(
			attribute.NewSet(o.operation, AttrReason.String(reasonValues[r])))}
	}
	return o
}

func handle(err error) {
	if err != nil {
		otel.Handle(err)
	}
}

// Observe records e. It is called by the retry loop; see retry.Observer.
func (o *observer) Observe(ctx context.Context, e retry.Event) {
	switch e.Kind {
	case retry.EventDone:
		o.attempts.Record(ctx, int64(e.Attempt), o.record...)
		if e.Attempt > 1 || e.Waited > 0 {
			o.delay.Record(ctx, e.Waited.Seconds(), o.record...)
		}
		if e.Err != nil {
			o.gaveUp.Add(ctx, 1, o.reasonAdd(e.Reason)...)
			if span := trace.SpanFromContext(ctx); span.IsRecording() {
				span.AddEvent("retry.gave_up", trace.WithAttributes(
					attribute.Int("retry.attempts", e.Attempt),
					AttrReason.String(reasonValue(e.Reason)),
					errorMessage(e.Err)))
			}
		}
	case retry.EventRetry:
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			attrs := []attribute.KeyValue{
				attribute.Int("retry.attempt", e.Attempt),
				attribute.Float64("retry.delay", e.Delay.Seconds()),
				errorMessage(e.Err)}
			if h, ok := retryhttp.WaitHint(e); ok {
				attrs = append(attrs, AttrHint.String(h.String()))
			}
			span.AddEvent("retry", trace.WithAttributes(attrs...))
		}
	case retry.EventHeld:
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			h, _ := retryhttp.WaitHint(e)
			span.AddEvent("retry.held", trace.WithAttributes(
				attribute.Int("retry.attempt", e.Attempt),
				attribute.Float64("retry.delay", e.Delay.Seconds()),
				AttrHint.String(h.String())))
		}
	case retry.EventThrottled:
		o.throttled.Add(ctx, 1, o.add...)
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.AddEvent("retry.throttled", trace.WithAttributes(attribute.Int("retry.attempt", e.Attempt)))
		}
	case retry.EventBudgetRefused:
		o.refused.Add(ctx, 1, o.add...)
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.AddEvent("retry.budget_refused", trace.WithAttributes(
				attribute.Int("retry.attempt", e.Attempt), errorMessage(e.Err)))
		}
	default:
		o.observeHedge(ctx, e)
	}
}

// reasonAdd returns the options that carry the attribute set of r.
func (o *observer) reasonAdd(r retry.Reason) []metric.AddOption {
	if int(r) < len(o.reasonAdds) && o.reasonAdds[r] != nil {
		return o.reasonAdds[r]
	}
	return []metric.AddOption{metric.WithAttributeSet(
		attribute.NewSet(o.operation, AttrReason.String(reasonValue(r))))}
}

func errorMessage(err error) attribute.KeyValue {
	if err == nil {
		return attribute.String("error.message", "")
	}
	return attribute.String("error.message", err.Error())
}
