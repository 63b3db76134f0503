package retryotel

import (
	"context"

	"github.com/retrykit/retry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// hedgeCounters are the instruments of hedged calls (retry.Hedge).
type hedgeCounters struct {
	sent, won, refused metric.Int64Counter
}

func newHedgeCounters(m metric.Meter) hedgeCounters {
	counter := func(name, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit("{hedge}"), metric.WithDescription(desc))
		if handle(err); c == nil {
			return noop.Int64Counter{}
		}
		return c
	}
	return hedgeCounters{
		sent:    counter("retry.hedge.sent", "Hedges sent: copies of a call sent while an earlier copy was still in flight."),
		won:     counter("retry.hedge.won", "Hedges that answered first: calls won by a copy sent while an earlier one was in flight."),
		refused: counter("retry.hedge.refused", "Hedges not sent because a retry.Budget or retry.Throttle refused them."),
	}
}

// observeHedge records the events of hedged calls, and adds a
// "retry.hedge" span event for each hedge sent.
func (o *observer) observeHedge(ctx context.Context, e retry.Event) {
	switch e.Kind {
	case retry.EventHedge:
		o.hedges.sent.Add(ctx, 1, o.add...)
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.AddEvent("retry.hedge", trace.WithAttributes(attribute.Int("retry.attempt", e.Attempt)))
		}
	case retry.EventHedgeWon:
		o.hedges.won.Add(ctx, 1, o.add...)
	case retry.EventHedgeRefused:
		o.hedges.refused.Add(ctx, 1, o.add...)
	}
}
