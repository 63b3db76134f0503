package retryvalkey

import (
	"errors"
	"net"
)

var (
	// ErrNotSent is matched (with errors.Is) by the error of a command that
	// never reached the server: the connection could not be dialled, at
	// every send of the call this client made, or the client had been
	// closed before the call. Such a command was not applied and may always
	// be retried. (valkey-go's own repeats of a first send are not seen:
	// see the package documentation.)
	ErrNotSent = errors.New("retryvalkey: command was not sent")

	// ErrMaybeApplied is matched (with errors.Is) by the error of a command
	// that was handed to a connection whose reply was lost (connection
	// reset or closed, timeout, context ended while waiting): the server
	// may or may not have applied it. valkey-go writes commands from a
	// background goroutine and pipelines them, so any failure after the
	// command was queued on a live connection is of this kind, valkey-go's
	// ErrClosing included when the client was closed while the call was
	// in flight. It is also matched when a later send of the same call
	// failed without a reply in another way (not sent).
	ErrMaybeApplied = errors.New("retryvalkey: command may have been applied")
)

type outcome uint8

const (
	outcomeReply outcome = iota + 1
	outcomeRefused
	outcomeNotSent
	outcomeMaybeApplied
	outcomeFinal
)

// CommandError is the error of a command that failed without a reply from
// the server. It wraps valkey-go's error (errors.Is and errors.As reach
// it) and matches ErrNotSent or ErrMaybeApplied. Replies of the server
// (*valkey.ValkeyError) are left as valkey-go returns them, except after
// an earlier send of the same call lost its reply: then the last reply (a
// refusal, say) comes wrapped in a CommandError that matches
// ErrMaybeApplied, since a bare refusal would say the command never ran.
type CommandError struct {
	// Command is the command's name as sent ("INCR").
	Command string
	// Err is valkey-go's error.
	Err error

	outcome outcome
	earlier bool // an earlier send of the call may have been applied
}

// Error returns "retryvalkey: INCR: " followed by what is known and the
// client's error.
func (e *CommandError) Error() string {
	what := "may have been applied: "
	switch e.outcome {
	case outcomeNotSent:
		what = "not sent: "
		if e.earlier {
			what = "may have been applied by an earlier send, then not sent: "
		}
	case outcomeRefused:
		what = "may have been applied by an earlier send, then refused by the server: "
	case outcomeReply:
		what = "may have been applied by an earlier send, then answered: "
	}
	return "retryvalkey: " + e.Command + ": " + what + e.Err.Error()
}

// Unwrap returns valkey-go's error.
func (e *CommandError) Unwrap() error { return e.Err }

// Is reports whether target is ErrNotSent or ErrMaybeApplied and
// describes this failure.
func (e *CommandError) Is(target error) bool {
	switch target {
	case ErrNotSent:
		return e.outcome == outcomeNotSent && !e.earlier
	case ErrMaybeApplied:
		return e.outcome == outcomeMaybeApplied || e.earlier
	}
	return false
}

// Overloaded reports whether the failure was a timeout, which a
// retry.Throttle counts as a rejection by its default rule.
func (e *CommandError) Overloaded() bool {
	var ne net.Error
	return errors.As(e.Err, &ne) && ne.Timeout()
}
