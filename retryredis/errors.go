package retryredis

import (
	"errors"
	"net"
)

var (
	// ErrNotSent is matched (with errors.Is) by the error of a command that
	// never reached the server: the connection could not be dialled, the
	// pool had no connection in time, or the write of a single command
	// failed before the server could have read all of it, at every attempt
	// of the call. Such a command was not applied and may always be retried
	// (unless go-redis refused the type of one of its arguments, which no
	// retry changes).
	// A call whose last attempt was not sent but an earlier one may have
	// been applied matches ErrMaybeApplied instead.
	ErrNotSent = errors.New("retryredis: command was not sent")

	// ErrMaybeApplied is matched (with errors.Is) by the error of a command
	// that was written to the server but whose reply was lost (connection
	// reset or closed, read timeout, context ended while waiting): the
	// server may or may not have applied it. Such a command is retried only
	// when it is safe to repeat (see the package documentation); otherwise
	// the caller gets this error at once and must find out for itself. It is
	// also matched when the last attempt failed otherwise (not sent,
	// refused, an error reply) after an earlier attempt of the same call
	// lost its reply.
	ErrMaybeApplied = errors.New("retryredis: command may have been applied")

	// ErrClientRetries is wrapped by the error of AddHook for a client
	// whose own retry loops are on (Options.MaxRetries other than -1, or
	// Options.DialerRetries other than 1): two retry layers would multiply
	// the attempts.
	ErrClientRetries = errors.New("retryredis: the client retries by itself")
)

// outcome says what is known about a failed command.
type outcome uint8

const (
	// outcomeReply: the server answered with an error reply that says the
	// request itself is wrong (ERR, WRONGTYPE, NOSCRIPT, ...). Not retried.
	outcomeReply outcome = iota + 1
	// outcomeRefused: the server refused the command without running it
	// (LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN, READONLY,
	// NOREPLICAS, max clients). Retried for any command.
	outcomeRefused
	// outcomeNotSent: the command never reached the server. Retried for
	// any command.
	outcomeNotSent
	// outcomeMaybeApplied: written, reply lost. Retried only when safe.
	outcomeMaybeApplied
	// outcomeFinal: the client is closed; nothing to retry.
	outcomeFinal
)

// CommandError is the error of a command (or pipeline) that failed in a
// way retryredis classified. It wraps the client's error, so errors.Is and
// errors.As reach it (a redis.Error reply, a *net.OpError, io.EOF, a
// context error), and matches ErrNotSent or ErrMaybeApplied as the case
// may be. Refusals that the server sent without running the command
// (LOADING, READONLY, ...) match neither: the wrapped redis.Error says
// what happened. What an earlier attempt of the same call left unknown
// counts too: once an attempt lost its reply (the command was safe to
// repeat), the call's error matches ErrMaybeApplied and not ErrNotSent,
// whatever the later attempts met, and an error reply at a later attempt
// comes back in a CommandError so that it says so.
type CommandError struct {
	// Command is the command's name in lower case ("incr"), or "pipeline"
	// or "multi" for a pipeline or transaction.
	Command string
	// Err is the client's error.
	Err error

	outcome outcome
	earlier bool // an earlier attempt of the call may have been applied
}

// Error returns "retryredis: incr: " followed by what is known and the
// client's error.
func (e *CommandError) Error() string {
	var what string
	if e.earlier && e.outcome != outcomeMaybeApplied {
		what = "may have been applied by an earlier attempt, then "
	}
	switch e.outcome {
	case outcomeNotSent:
		what += "not sent: "
	case outcomeMaybeApplied:
		what = "may have been applied: "
	case outcomeRefused:
		what += "refused by the server, not run: "
	}
	return "retryredis: " + e.Command + ": " + what + e.Err.Error()
}

// Unwrap returns the client's error.
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

// Overloaded reports whether the failure says the server cannot take the
// request now (a refusal such as LOADING or BUSY, or a timeout), which a
// retry.Throttle counts as a rejection by its default rule.
func (e *CommandError) Overloaded() bool {
	if e.outcome == outcomeRefused {
		return true
	}
	var ne net.Error
	return errors.As(e.Err, &ne) && ne.Timeout()
}
