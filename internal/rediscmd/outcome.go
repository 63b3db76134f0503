package rediscmd

import (
	"context"
	"errors"
	"net"

	"github.com/retrykit/retry"
)

// Outcome says what is known about a failed command. The zero Outcome is
// not used.
type Outcome uint8

const (
	// OutcomeReply: the server answered with an error reply that says the
	// request itself is wrong (ERR, WRONGTYPE, NOSCRIPT, ...). Not retried.
	OutcomeReply Outcome = iota + 1
	// OutcomeRefused: the server refused the command without running it
	// (see Refusal). Retried for any command.
	OutcomeRefused
	// OutcomeNotSent: the command never reached the server. Retried for
	// any command.
	OutcomeNotSent
	// OutcomeMaybeApplied: written, reply lost. Retried only when safe.
	OutcomeMaybeApplied
	// OutcomeFinal: the client is closed; nothing to retry.
	OutcomeFinal
)

// Known is what is known about the failure of a command, one attempt or
// the whole call: the outcome of its last attempt, and whether an earlier
// attempt of the same call may have been applied (Earlier). The zero
// Known is not used.
type Known struct {
	Outcome Outcome
	Earlier bool
}

// Is is the errors.Is rule of retryredis's and retryvalkey's
// CommandError: whether target is retry.ErrNotSent or retry.ErrMaybeApplied
// and describes the failure. Once an earlier attempt may have been
// applied, the call matches retry.ErrMaybeApplied and not
// retry.ErrNotSent, whatever the later attempts met.
func (k Known) Is(target error) bool {
	switch target {
	case retry.ErrNotSent:
		return k.Outcome == OutcomeNotSent && !k.Earlier
	case retry.ErrMaybeApplied:
		return k.Outcome == OutcomeMaybeApplied || k.Earlier
	}
	return false
}

// Timeout reports whether err is or wraps a net.Error that timed out.
func Timeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// SafeMark marks contexts whose commands the caller says are safe to
// repeat. Each client package has its own SafeMark variable, so that a
// mark given through one package is not seen by the other. The zero
// SafeMark is ready to use; it must not be copied after first use, since
// its address is the context key.
type SafeMark struct{ _ byte } // not zero-sized: each variable has its own address

// Mark returns a context that carries the mark.
func (m *SafeMark) Mark(ctx context.Context) context.Context {
	return context.WithValue(ctx, m, true)
}

// Marked reports whether ctx carries the mark.
func (m *SafeMark) Marked(ctx context.Context) bool {
	v, _ := ctx.Value(m).(bool)
	return v
}
