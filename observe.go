package retry

import (
	"context"
	"log/slog"
	"strconv"
	"time"
)

// EventKind says what an [Event] reports.
type EventKind uint8

const (
	// EventAttempt: attempt number Attempt is about to be sent (a Throttle,
	// if any, let it through). Every attempt that calls the operation is
	// reported once, the first included.
	EventAttempt EventKind = iota + 1
	// EventRetry: attempt Attempt failed with Err and the loop is about to
	// wait Delay before the next one.
	EventRetry
	// EventThrottled: the Throttle rejected attempt Attempt locally; the
	// operation was not called and Err is [ErrThrottled]. The loop goes on
	// as for any failure (an EventRetry or EventDone follows).
	EventThrottled
	// EventBudgetRefused: the Budget refused the retry after attempt
	// Attempt; an EventDone with [ReasonBudget] follows.
	EventBudgetRefused
	// EventDone: the call ended. Attempt is the number of attempts made;
	// Err is nil on success and otherwise the [*Error] that the call
	// returns, whose Reason is also in Reason; Waited is the total time the
	// call spent waiting between attempts, a wait that the context cut
	// short included.
	EventDone
	// EventHedge: a hedged call ([Hedge]) sends attempt Attempt while
	// earlier copies are still in flight, because the hedge delay passed
	// or a copy failed with a retryable error. Its EventAttempt follows.
	EventHedge
	// EventHedgeWon: attempt Attempt, a hedge, succeeded first; the other
	// copies are being cancelled.
	EventHedgeWon
	// EventHedgeCancelled: attempt Attempt, still in flight, is cancelled
	// because another copy won or the call ended.
	EventHedgeCancelled
	// EventHedgeRefused: the Budget (Err matches [ErrBudgetRefused]) or
	// the Throttle (Err is [ErrThrottled]) refused hedge Attempt, which is
	// not sent; no more hedges follow in this burst, and the call waits
	// for the copies in flight.
	EventHedgeRefused
	// EventHeld: a client-side pacer (retryhttp's Pacer) holds attempt
	// Attempt for Delay before sending it, because a server said that the
	// quota the attempt draws on is spent until then; Err says which
	// hint. The loop does not emit it: the layer that holds the attempt
	// does, on the goroutine sending it, after that attempt's EventAttempt
	// (before it under an AttemptTimeout, whose attempt starts once the
	// hold ends).
	EventHeld
	// EventThrottleStarted: a Throttle started rejecting attempts (its
	// rejection probability rose above 0, or Override forced rejection).
	// Sent to ThrottleConfig.Observer, not to a Policy's: the state is the
	// Throttle's, shared by every call. Only Kind is set.
	EventThrottleStarted
	// EventThrottleStopped: a Throttle stopped rejecting attempts (its
	// rejection probability fell to 0, or Override forced none). Sent to
	// ThrottleConfig.Observer. Only Kind is set.
	EventThrottleStopped
)

var eventKindNames = [...]string{
	EventAttempt:         "attempt",
	EventRetry:           "retry",
	EventThrottled:       "throttled",
	EventBudgetRefused:   "budget_refused",
	EventDone:            "done",
	EventHedge:           "hedge",
	EventHedgeWon:        "hedge_won",
	EventHedgeCancelled:  "hedge_cancelled",
	EventHedgeRefused:    "hedge_refused",
	EventHeld:            "held",
	EventThrottleStarted: "throttle_started",
	EventThrottleStopped: "throttle_stopped",
}

// String returns the kind's lower-case name, such as "retry".
func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && eventKindNames[k] != "" {
		return eventKindNames[k]
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is what an [Observer] is told about one step of a retry loop. Which
// fields are set depends on Kind; the others are zero.
type Event struct {
	Kind        EventKind
	Attempt     int           // the attempt concerned, 1-based; for EventDone, the attempts made
	MaxAttempts int           // the policy's attempt limit, or Unlimited
	Err         error         // EventRetry, EventThrottled, EventBudgetRefused: the attempt's error; EventDone: nil or the *Error; EventHeld: why the attempt is held
	Delay       time.Duration // EventRetry, EventHeld: the wait about to start
	Waited      time.Duration // the waits so far: before the attempt (EventAttempt, EventThrottled), before the failed attempt (EventRetry, EventBudgetRefused: Delay not included), in the whole call (EventDone, a wait the context cut short included)
	Elapsed     time.Duration // EventRetry, EventBudgetRefused, EventDone after a failure: time since the call started (see Error.Elapsed)
	Reason      Reason        // EventDone: why the loop gave up; zero on success
}

// Observer sees what retry loops do: every attempt, retry and wait, every
// rejection by a Throttle or refusal by a Budget, and the end of every call
// with its outcome. Set one as Policy.Observer to feed metrics, traces or
// logs; the retryotel module provides one for OpenTelemetry.
//
// Observe is called synchronously, on the goroutine running the loop, with
// the context of the call (for EventAttempt, the attempt's own context when
// the policy has an AttemptTimeout, and in a hedged call always the copy's).
// In a hedged call ([Hedge]) the events of one call come one at a time
// from several goroutines: the caller's, the copies' and the hedge
// timer's. Implementations must be safe for
// concurrent use, because one Policy serves any number of calls at once,
// and must return quickly: the loop waits for them. They must not retain
// the Event's Err beyond the call unless they need it.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to an [Observer].
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f(ctx, e).
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// Observers returns an Observer that passes each event to every non-nil
// observer in obs, in order. It returns nil when obs holds none, and the
// observer itself when it holds one. With two or more, the Observer it
// returns has a method Unwrap() []Observer that returns them (as the error
// of errors.Join has Unwrap() []error), so that a package that installs
// an Observer, such as retryotel's Instrument, can find its own in a
// Policy and replace it rather than add a second.
func Observers(obs ...Observer) Observer {
	var list multiObserver
	for _, o := range obs {
		if o != nil {
			list = append(list, o)
		}
	}
	switch len(list) {
	case 0:
		return nil
	case 1:
		return list[0]
	}
	return list
}

type multiObserver []Observer

func (m multiObserver) Observe(ctx context.Context, e Event) {
	for _, o := range m {
		o.Observe(ctx, e)
	}
}

// Unwrap returns the observers, in order. The slice is m itself: callers
// must not change it.
func (m multiObserver) Unwrap() []Observer { return m }

// emit hands e to the policy's Observer and Logger. Callers check that at
// least one of them is set, so that a policy without either pays nothing.
func (p *Policy) emit(ctx context.Context, e Event) {
	if p.Observer != nil {
		p.Observer.Observe(ctx, e)
	}
	if p.Logger != nil && p.Logger.Handler() != nil { // a zero slog.Logger has none: it logs nothing
		logEvent(ctx, p.Logger, e)
	}
}

// logEvent writes the events a Policy.Logger shows: each retry at Debug
// level and giving up at Error level.
func logEvent(ctx context.Context, l *slog.Logger, e Event) {
	switch {
	case e.Kind == EventRetry:
		if l.Enabled(ctx, slog.LevelDebug) {
			l.LogAttrs(ctx, slog.LevelDebug, "retry: attempt failed, retrying",
				slog.Int("attempt", e.Attempt), slog.Int("max_attempts", e.MaxAttempts),
				slog.Duration("delay", e.Delay), slog.Duration("elapsed", e.Elapsed),
				slog.String("error", e.Err.Error()))
		}
	case e.Kind == EventDone && e.Err != nil:
		if !l.Enabled(ctx, slog.LevelError) {
			return
		}
		attrs := []slog.Attr{
			slog.Int("attempts", e.Attempt),
			slog.Duration("elapsed", e.Elapsed),
			slog.String("reason", e.Reason.String()),
		}
		if re, ok := e.Err.(*Error); ok {
			if re.Err != nil {
				attrs = append(attrs, slog.String("error", re.Err.Error()))
			}
			if re.Cause != nil {
				attrs = append(attrs, slog.String("cause", re.Cause.Error()))
			}
		}
		l.LogAttrs(ctx, slog.LevelError, "retry: giving up", attrs...)
	}
}
