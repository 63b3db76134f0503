package retrygrpc

import (
	"context"
	"errors"

	"github.com/retrykit/retry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// contextError is the interceptors' error for a call that the caller's
// context ended after an attempt that failed with a code that is retried
// (during the wait before the retry, or before that wait began), or before
// the loop sent any attempt. As grpc-go's own retry reports such a call,
// its status is CANCELLED or DEADLINE_EXCEEDED; errors.Is matches the
// context's error; errors.As finds the *retry.Error (Reason
// retry.ReasonContext), whose Err is the last attempt's status error and
// which tells enclosing retry layers that a loop gave up.
type contextError struct{ re *retry.Error }

func (e *contextError) Error() string { return e.re.Error() }
func (e *contextError) Unwrap() error { return e.re }

// GRPCStatus returns the status that status.Code and status.FromError
// see: the context's code, with the message of the *retry.Error.
func (e *contextError) GRPCStatus() *status.Status {
	return status.New(contextCode(e.re.Cause), e.re.Error())
}

// contextCode is the status code with which grpc-go ends a call whose
// context ended with err: CANCELLED, DEADLINE_EXCEEDED, or UNKNOWN for an
// error that is neither.
func contextCode(err error) codes.Code {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	return codes.Unknown
}
