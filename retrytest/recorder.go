package retrytest

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retrykit/retry"
)

// Recorder is a [retry.Observer] that records every event it is told,
// grouped into calls, for a test to read in one line: rec.Attempts(),
// rec.Waits(), rec.Reason(). Its zero value is ready to use; it is safe for
// concurrent use (set one as Policy.Observer, or combine it with others
// through retry.Observers).
//
// Events go to the call named by [WithCall] in their context, or for a
// context without a name to the unnamed call in progress; an EventDone ends
// a call. Name the calls a test runs concurrently, so that their events
// are not mixed. The summary methods of Recorder (Attempts, Waits, Hedges,
// Reason, …) read every event recorded; those of [Call] read one call.
type Recorder struct {
	mu    sync.Mutex
	all   []retry.Event
	calls []*Call
	open  map[string]*Call
}

type callName struct{}

// WithCall returns a child of ctx whose retry calls a [Recorder] records
// under name.
func WithCall(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, callName{}, name)
}

// Observe records e. It implements [retry.Observer].
func (r *Recorder) Observe(ctx context.Context, e retry.Event) {
	name, _ := ctx.Value(callName{}).(string)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, e)
	c := r.open[name]
	if c == nil {
		if r.open == nil {
			r.open = map[string]*Call{}
		}
		c = &Call{Name: name}
		r.open[name] = c
		r.calls = append(r.calls, c)
	}
	c.Events = append(c.Events, e)
	if e.Kind == retry.EventDone {
		delete(r.open, name)
	}
}

// Reset forgets everything recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.all, r.calls, r.open = nil, nil, nil
	r.mu.Unlock()
}

// Calls returns a copy of the calls recorded, in the order they started.
// The last may still be in progress (no EventDone yet).
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Call, len(r.calls))
	for i, c := range r.calls {
		out[i] = Call{Name: c.Name, Events: append([]retry.Event(nil), c.Events...)}
	}
	return out
}

// Call returns the last call recorded under name ("" for unnamed calls);
// its Events are nil when there is none.
func (r *Recorder) Call(name string) Call {
	calls := r.Calls()
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Name == name {
			return calls[i]
		}
	}
	return Call{Name: name}
}

// Last returns the last call that started; its Events are nil when none did.
func (r *Recorder) Last() Call {
	calls := r.Calls()
	if len(calls) == 0 {
		return Call{}
	}
	return calls[len(calls)-1]
}

// whole returns every event recorded, as one Call.
func (r *Recorder) whole() Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Call{Events: append([]retry.Event(nil), r.all...)}
}

// Events returns a copy of every event recorded, in order.
func (r *Recorder) Events() []retry.Event { return r.whole().Events }

// Kinds returns the kind of every event recorded, in order.
func (r *Recorder) Kinds() []retry.EventKind { return r.whole().Kinds() }

// Count returns how many events of kind were recorded.
func (r *Recorder) Count(kind retry.EventKind) int { return r.whole().Count(kind) }

// Attempts returns how many attempts were sent, in every call recorded.
func (r *Recorder) Attempts() int { return r.whole().Attempts() }

// Waits returns the wait before each retry, in every call recorded, in order.
func (r *Recorder) Waits() []time.Duration { return r.whole().Waits() }

// Hedges returns how many hedges were sent, in every call recorded.
func (r *Recorder) Hedges() int { return r.whole().Hedges() }

// Done returns the last EventDone recorded, and whether there is one.
func (r *Recorder) Done() (retry.Event, bool) { return r.whole().Done() }

// First returns the first event of kind recorded, and whether there is one.
func (r *Recorder) First(kind retry.EventKind) (retry.Event, bool) { return r.whole().First(kind) }

// Of returns the events of kind recorded, in order (rec.Of(retry.EventRetry):
// the retries).
func (r *Recorder) Of(kind retry.EventKind) []retry.Event { return r.whole().Of(kind) }

// Reason returns why the last call that ended stopped: zero for a success
// or when no call ended.
func (r *Recorder) Reason() retry.Reason { return r.whole().Reason() }

// String returns every event recorded on one line (see [Call.String]).
func (r *Recorder) String() string { return r.whole().String() }

// Call is the record of one retry call: its events in order. Name is the
// name given with [WithCall], "" for an unnamed call.
type Call struct {
	Name   string
	Events []retry.Event
}

// Kinds returns the kind of each event, in order.
func (c Call) Kinds() []retry.EventKind {
	ks := make([]retry.EventKind, len(c.Events))
	for i, e := range c.Events {
		ks[i] = e.Kind
	}
	return ks
}

// Count returns how many events of kind the call has.
func (c Call) Count(kind retry.EventKind) int {
	n := 0
	for _, e := range c.Events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// Attempts returns how many attempts the call sent (its EventAttempts;
// attempts a Throttle rejected are not sent).
func (c Call) Attempts() int { return c.Count(retry.EventAttempt) }

// Hedges returns how many hedges the call sent (its EventHedges).
func (c Call) Hedges() int { return c.Count(retry.EventHedge) }

// Waits returns the wait before each retry (the Delay of each EventRetry),
// in order; nil when the call did not retry.
func (c Call) Waits() []time.Duration {
	var ws []time.Duration
	for _, e := range c.Events {
		if e.Kind == retry.EventRetry {
			ws = append(ws, e.Delay)
		}
	}
	return ws
}

// Of returns the call's events of kind, in order; nil when it has none.
func (c Call) Of(kind retry.EventKind) []retry.Event {
	var out []retry.Event
	for _, e := range c.Events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// First returns the call's first event of kind, and whether it has one.
func (c Call) First(kind retry.EventKind) (retry.Event, bool) {
	for _, e := range c.Events {
		if e.Kind == kind {
			return e, true
		}
	}
	return retry.Event{}, false
}

// Done returns the call's last EventDone, and whether it has one.
func (c Call) Done() (retry.Event, bool) {
	for i := len(c.Events) - 1; i >= 0; i-- {
		if c.Events[i].Kind == retry.EventDone {
			return c.Events[i], true
		}
	}
	return retry.Event{}, false
}

// Reason returns why the call stopped: the Reason of its EventDone, zero
// for a success or a call that has not ended.
func (c Call) Reason() retry.Reason {
	e, _ := c.Done()
	return e.Reason
}

// String returns the events on one line, such as
// "attempt 1, retry 1 wait 1s, attempt 2, done 2 ok": each event's kind and
// attempt, with a retry's wait and how a call ended ("ok" or the reason).
func (c Call) String() string {
	var b strings.Builder
	for i, e := range c.Events {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.Kind.String())
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(e.Attempt))
		switch {
		case e.Kind == retry.EventRetry:
			b.WriteString(" wait ")
			b.WriteString(e.Delay.String())
		case e.Kind == retry.EventDone && e.Reason == 0 && e.Err == nil:
			b.WriteString(" ok")
		case e.Kind == retry.EventDone:
			b.WriteString(" (" + e.Reason.String() + ")")
		}
	}
	return b.String()
}
