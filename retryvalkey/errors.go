package retryvalkey

import "github.com/retrykit/retry/internal/rediscmd"

// CommandError is the error of a command that failed without a reply from
// the server. It wraps valkey-go's error (errors.Is and errors.As reach
// it) and matches retry.ErrNotSent or retry.ErrMaybeApplied. Replies of the server
// (*valkey.ValkeyError) are left as valkey-go returns them, except after
// an earlier send of the same call lost its reply: then the last reply (a
// refusal, say) comes wrapped in a CommandError that matches
// retry.ErrMaybeApplied, since a bare refusal would say the command never ran.
type CommandError struct {
	// Command is the command's name as sent ("INCR").
	Command string
	// Err is valkey-go's error.
	Err error

	known rediscmd.Known // what is known of the failure
}

// Error returns "retryvalkey: INCR: " followed by what is known and the
// client's error.
func (e *CommandError) Error() string {
	what := "may have been applied: "
	switch e.known.Outcome {
	case rediscmd.OutcomeNotSent:
		what = "not sent: "
		if e.known.Earlier {
			what = "may have been applied by an earlier send, then not sent: "
		}
	case rediscmd.OutcomeRefused:
		what = "may have been applied by an earlier send, then refused by the server: "
	case rediscmd.OutcomeReply:
		what = "may have been applied by an earlier send, then answered: "
	}
	return "retryvalkey: " + e.Command + ": " + what + e.Err.Error()
}

// Unwrap returns valkey-go's error.
func (e *CommandError) Unwrap() error { return e.Err }

// Is reports whether target is retry.ErrNotSent or retry.ErrMaybeApplied and
// describes this failure.
func (e *CommandError) Is(target error) bool {
	return e.known.Is(target)
}

// Overloaded reports whether the failure was a timeout, which a
// retry.Throttle counts as a rejection by its default rule.
func (e *CommandError) Overloaded() bool { return rediscmd.Timeout(e.Err) }
