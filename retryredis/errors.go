package retryredis

import (
	"errors"

	"github.com/retrykit/retry/internal/rediscmd"
)

var (
	// ErrClientRetries is wrapped by the error of AddHook for a client
	// whose own retry loops are on (Options.MaxRetries other than -1, or
	// Options.DialerRetries other than 1): two retry layers would multiply
	// the attempts.
	ErrClientRetries = errors.New("retryredis: the client retries by itself")
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

	known rediscmd.Known // what is known of the failure
}

// Error returns "retryredis: incr: " followed by what is known and the
// client's error.
func (e *CommandError) Error() string {
	var what string
	if e.known.Earlier && e.known.Outcome != rediscmd.OutcomeMaybeApplied {
		what = "may have been applied by an earlier attempt, then "
	}
	switch e.known.Outcome {
	case rediscmd.OutcomeNotSent:
		what += "not sent: "
	case rediscmd.OutcomeMaybeApplied:
		what = "may have been applied: "
	case rediscmd.OutcomeRefused:
		what += "refused by the server, not run: "
	}
	return "retryredis: " + e.Command + ": " + what + e.Err.Error()
}

// Unwrap returns the client's error.
func (e *CommandError) Unwrap() error { return e.Err }

// Is reports whether target is retry.ErrNotSent or retry.ErrMaybeApplied and
// describes this failure.
func (e *CommandError) Is(target error) bool {
	return e.known.Is(target)
}

// Overloaded reports whether the failure says the server cannot take the
// request now (a refusal such as LOADING or BUSY, or a timeout), which a
// retry.Throttle counts as a rejection by its default rule.
func (e *CommandError) Overloaded() bool {
	return e.known.Outcome == rediscmd.OutcomeRefused || rediscmd.Timeout(e.Err)
}
