package retryaws

import (
	"errors"
	"strconv"

	"github.com/retrykit/retry"
)

var (
	// ErrMaxAttemptsOverride is matched by the error of a call made through
	// a client whose attempt limit the SDK overrides (AWS_MAX_ATTEMPTS,
	// max_attempts in the shared config, Options.RetryMaxAttempts, or
	// retry.AddWithMaxAttempts around the Retryer): such a call is refused
	// before its first attempt is sent, since the policy's MaxAttempts would
	// silently not apply. Set aws.Config.RetryMaxAttempts, or the client's
	// Options.RetryMaxAttempts, to 0.
	ErrMaxAttemptsOverride = errors.New("retryaws: the SDK overrides the attempt limit")
)

// stopError is what GetRetryToken (and GetAttemptToken, for a first
// attempt that the Throttle rejected until the call gave up) returns when
// the Retryer ends a call; the SDK joins it to the attempt's error with
// errors.Join, so that the caller's error matches both. It unwraps to the
// *retry.Error that retry.Do would have returned, so that retry.IsExhausted
// holds and an enclosing retry loop does not retry the call again.
type stopError struct {
	e     *retry.Error
	maybe bool // an attempt may have been applied
	lost  bool // the last one may have been
	// fixedBody: the call was not retried because its body cannot be
	// sent again (AddBodyCheck)
	fixedBody bool
}

// Error says why the retries stopped, without the attempt's error, which
// errors.Join prints on the line before.
func (s *stopError) Error() string {
	msg := "retryaws: gave up after " + strconv.Itoa(s.e.Attempts) + " attempt"
	if s.e.Attempts != 1 {
		msg += "s"
	}
	switch {
	case s.fixedBody && s.lost:
		return msg + ": the request may have been applied, and its body cannot be sent again (not an io.Seeker)"
	case s.fixedBody:
		return msg + ": the request body cannot be sent again (not an io.Seeker)"
	case s.lost && s.e.Reason == retry.ReasonPermanent:
		return msg + ": the request may have been applied, and the operation is not safe to repeat"
	case s.lost:
		return msg + " (" + s.e.Reason.String() + "): the request may have been applied"
	case s.maybe:
		return msg + " (" + s.e.Reason.String() + "): an earlier attempt may have been applied"
	}
	return msg + " (" + s.e.Reason.String() + ")"
}

func (s *stopError) Unwrap() error { return s.e }

// Is reports whether target is retry.ErrMaybeApplied and describes this
// call.
func (s *stopError) Is(target error) bool { return target == retry.ErrMaybeApplied && s.maybe }

// overrideError is the error of a call whose attempt limit the SDK
// overrides (see ErrMaxAttemptsOverride).
type overrideError struct{ max int }

func (e *overrideError) Error() string {
	return "retryaws: the SDK limits this call to " + strconv.Itoa(e.max) +
		" attempts (AWS_MAX_ATTEMPTS, max_attempts or RetryMaxAttempts), which would replace the policy's MaxAttempts: set RetryMaxAttempts to 0; the call was not sent"
}

func (e *overrideError) Is(target error) bool { return target == ErrMaxAttemptsOverride }

// Exhausted reports true: the call was refused on purpose, and an
// enclosing retry loop must not send it again.
func (e *overrideError) Exhausted() bool { return true }

// errNilRetryer is the error of every call through a nil *Retryer.
type errNilRetryer struct{}

func (errNilRetryer) Error() string {
	return "retryaws: the Retryer is nil (use the one New returns, after checking its error); the call was not sent"
}

// Exhausted reports true: an enclosing retry loop must not send the call
// again.
func (errNilRetryer) Exhausted() bool { return true }
