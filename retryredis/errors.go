package retryredis

import (
	"errors"
	"net"

	"github.com/retrykit/retry"
)

var (
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
// context error), and matches retry.ErrNotSent or retry.ErrMaybeApplied as the case
// may be. Refusals that the server sent without running the command
// (LOADING, READONLY, ...) match neither: the wrapped redis.Error says
// what happened. What an earlier attempt of the same call left unknown
// counts too: once an attempt lost its reply (the command was safe to
// repeat), the call's error matches retry.ErrMaybeApplied and not retry.ErrNotSent,
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

// Is reports whether target is retry.ErrNotSent or retry.ErrMaybeApplied and
// describes this failure.
func (e *CommandError) Is(target error) bool {
	switch target {
	case retry.ErrNotSent:
		return e.outcome == outcomeNotSent && !e.earlier
	case retry.ErrMaybeApplied:
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
