package retry

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Reason tells why a retry loop stopped without success.
type Reason uint8

const (
	// ReasonAttempts: MaxAttempts attempts were made.
	ReasonAttempts Reason = iota + 1
	// ReasonPermanent: the error was marked [Permanent] or Policy.Retryable
	// rejected it.
	ReasonPermanent
	// ReasonExhausted: the error came from an inner retry loop that had
	// already given up (see Policy.RetryExhausted).
	ReasonExhausted
	// ReasonTimeBudget: the next wait would not end within MaxElapsed.
	ReasonTimeBudget
	// ReasonDeadline: the next wait would not end before the context's
	// deadline, so the loop gave up at once instead of sleeping into a
	// certain failure.
	ReasonDeadline
	// ReasonContext: the context was cancelled or its deadline passed.
	ReasonContext
	// ReasonBudget: the shared retry [Budget] refused the retry.
	ReasonBudget
)

var reasonNames = [...]string{
	ReasonAttempts:   "attempts used up",
	ReasonPermanent:  "error not retryable",
	ReasonExhausted:  "inner retry loop already gave up",
	ReasonTimeBudget: "time budget used up",
	ReasonDeadline:   "next wait would pass the context deadline",
	ReasonContext:    "context done",
	ReasonBudget:     "retry budget exhausted",
}

// String returns a short human description, such as "attempts used up".
func (r Reason) String() string {
	if int(r) < len(reasonNames) && reasonNames[r] != "" {
		return reasonNames[r]
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// ErrBudgetRefused is matched (with errors.Is) by the [*Error] of a loop
// that stopped because its [Budget] refused a retry.
var ErrBudgetRefused = errors.New("retry: retry refused by the budget")

// ErrMaybeApplied is matched (with errors.Is) by the error of a call whose
// last attempt may have taken effect at the server although no reply came
// back: a connection lost after the request was sent, a lost COMMIT reply.
// Such a call is not repeated unless it is safe to repeat, and its caller
// must find out whether it took effect before trying again. Every
// integration module's errors match this one value.
var ErrMaybeApplied = errors.New("retry: call may have been applied")

// ErrNotSent is matched (with errors.Is) by the error of a call whose last
// attempt certainly never reached the server (a refused dial, a request
// that never left the client), so repeating it cannot apply it twice.
// Every integration module's errors match this one value.
var ErrNotSent = errors.New("retry: call was not sent")

// ErrThrottled is the error of an attempt that a [Throttle] rejected locally:
// the operation was not called. It is retried like any failure. When a loop
// gives up on such an attempt after one that was made, the [Error]'s Err
// matches both ErrThrottled and the error of the last attempt made (with
// errors.Is and errors.As), so that what the backend answered is not lost.
var ErrThrottled = errors.New("retry: attempt rejected by client-side throttle")

// throttledError is the last error of a loop whose last attempts the
// Throttle rejected after one that was made and failed with made.
type throttledError struct{ made error }

func (e *throttledError) Error() string {
	return ErrThrottled.Error() + ", after: " + e.made.Error()
}

func (e *throttledError) Unwrap() []error { return []error{ErrThrottled, e.made} }

// Error is what [Do] returns when it gives up. It wraps the last attempt's
// error, so errors.Is and errors.As see through it, and tells how many
// attempts were made, how long they took and why the loop stopped. When the
// context ended the loop, errors.Is(err, context.Canceled) (or
// context.DeadlineExceeded) also holds.
type Error struct {
	// Attempts is the number of times the operation was called or, with a
	// Throttle, rejected locally.
	Attempts int
	// Elapsed is the time from the start of Do to giving up. When the
	// policy has no MaxElapsed, Do reads no clock before the first attempt
	// (so that the success path costs nothing) and Elapsed is measured from
	// the end of the first attempt.
	Elapsed time.Duration
	// Reason says why the loop stopped.
	Reason Reason
	// Err is the last attempt's error; nil only when the context ended
	// before the first attempt. When the Throttle rejected the last
	// attempts, it matches ErrThrottled and, if an attempt was made before
	// them, that attempt's error too.
	Err error
	// Cause is the context's error when Reason is ReasonContext or
	// ReasonDeadline, and nil otherwise.
	Cause error
}

// Error describes the failure in one line, for example
// "retry: gave up after 3 attempts in 7.2s (attempts used up): connection refused".
func (e *Error) Error() string {
	if e == nil {
		return "retry: <nil *retry.Error>"
	}
	b := make([]byte, 0, 96)
	b = append(b, "retry: gave up after "...)
	b = strconv.AppendInt(b, int64(e.Attempts), 10)
	if e.Attempts == 1 {
		b = append(b, " attempt in "...)
	} else {
		b = append(b, " attempts in "...)
	}
	b = append(b, e.Elapsed.Round(time.Millisecond).String()...)
	b = append(b, " ("...)
	b = append(b, e.Reason.String()...)
	b = append(b, ')')
	if e.Err != nil {
		b = append(b, ": "...)
		b = append(b, e.Err.Error()...)
	} else if e.Cause != nil {
		b = append(b, ": "...)
		b = append(b, e.Cause.Error()...)
	}
	return string(b)
}

// Unwrap returns the last attempt's error.
func (e *Error) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Is reports whether target is the context error that ended the loop or, for
// ReasonBudget, ErrBudgetRefused. The last error is matched through Unwrap.
func (e *Error) Is(target error) bool {
	if e == nil {
		return false
	}
	// errors.Is, not ==: a Context's error may be of a type that ==
	// cannot compare, and == on two such values panics.
	if e.Cause != nil && errors.Is(e.Cause, target) {
		return true
	}
	return e.Reason == ReasonBudget && target == ErrBudgetRefused
}

// Exhausted reports true: an *Error means a retry loop already gave up, so an
// enclosing loop does not retry it by default.
func (e *Error) Exhausted() bool { return true }

// IsExhausted reports whether err, or an error it wraps, says that a retry
// loop already gave up on it: an [*Error], or any error with a method
// Exhausted() bool that returns true (an error of another library can say
// so this way).
func IsExhausted(err error) bool {
	return walk(err, func(e error) bool {
		x, ok := e.(interface{ Exhausted() bool })
		return ok && x.Exhausted()
	})
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as not retryable: the loop stops at once and returns
// an [*Error] with ReasonPermanent that wraps err. errors.Is and errors.As
// see through the mark. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err, or an error it wraps, was marked with
// [Permanent].
func IsPermanent(err error) bool {
	return walk(err, func(e error) bool {
		_, ok := e.(*permanentError)
		return ok
	})
}

type afterError struct {
	err error
	d   time.Duration
}

func (e *afterError) Error() string { return e.err.Error() }
func (e *afterError) Unwrap() error { return e.err }

// ServerWait marks err as retryable after at least d, the server's wait: how
// long the server said to wait (an HTTP Retry-After, a gRPC pushback). The
// loop waits max(d, computed wait), uncapped by MaxDelay, and gives up at
// once when that wait would not end within MaxElapsed or before the
// context's deadline. Cap what you accept from a server before you call
// ServerWait (the integrations' WithMaxServerWait). ServerWait(nil, d) is
// nil; a negative d counts as zero.
func ServerWait(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &afterError{err, max(d, 0)}
}

// ServerWaitOf returns the server's wait that err carries through
// [ServerWait], and whether it carries one.
func ServerWaitOf(err error) (d time.Duration, ok bool) {
	walk(err, func(e error) bool {
		var a *afterError
		a, ok = e.(*afterError)
		if ok {
			d = a.d
		}
		return ok
	})
	return d, ok
}

// walk calls f on err and on every error it wraps, depth first as errors.Is
// does, until f returns true. Unlike errors.As it allocates nothing.
func walk(err error, f func(error) bool) bool {
	for err != nil {
		if f(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if walk(e, f) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// isContextErr reports whether context.Canceled or context.DeadlineExceeded
// itself is in err's chain: the end of a context. An error that only
// matches one of them through its Is method, as net's dial timeout and
// net/http's timeouts match context.DeadlineExceeded, is not: it ends one
// attempt, not a context, and is retried like any other failure.
func isContextErr(err error) bool {
	return walk(err, func(e error) bool {
		// Comparing with the sentinels cannot panic: their dynamic types
		// are comparable.
		return e == context.Canceled || e == context.DeadlineExceeded
	})
}
