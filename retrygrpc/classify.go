package retrygrpc

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/serverwait"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Metadata keys of gRFC A6 that the interceptors send and read.
const (
	// HeaderPreviousAttempts is sent on every retry with the number of
	// earlier attempts of the same call that were sent ("1" on the first
	// retry; an attempt that the Throttle rejected is not counted); a
	// first attempt does not carry it, and a value in the caller's
	// outgoing metadata is dropped (on every method, retried or not).
	HeaderPreviousAttempts = "grpc-previous-rpc-attempts"
	// TrailerPushback is the trailer in which a server says how long to
	// wait before retrying, in milliseconds; a negative or malformed value
	// means "do not retry", and so does a trailer with more than one value
	// (grpc-go does not retry it either), which the interceptors pass on
	// to enclosing retry layers by returning a *retry.Error.
	TrailerPushback = "grpc-retry-pushback-ms"
)

// attemptError is the error of one attempt that failed with a status the
// interceptor retries. It keeps the status error reachable (status.Code,
// status.FromError and errors.As see through it) and tells a retry.Throttle
// which failures mean overload.
type attemptError struct {
	err  error
	code codes.Code
	// refused: the code is one that is retried, but the server's answer
	// forbids a retry (a "do not retry" pushback, a wait longer than
	// WithMaxServerWait, or response headers, which commit the call), or
	// the error is the client's own and would recur (sendTooLarge). Enclosing retry layers, which cannot see
	// the trailer or the headers, must not retry it either: result keeps
	// the *retry.Error for them.
	refused bool
	// local: grpc-go raised the error on the client, the request unsent
	// (see sendTooLarge); it is no sign of an overloaded backend.
	local bool
	// retried: the code is one that the interceptor retries (WithCodes,
	// or DEADLINE_EXCEEDED with an AttemptTimeout), whether or not the
	// server's answer then refused the retry. When the caller's context
	// ends after such an attempt, it is the context that ends the call
	// (see contextError); after any other, the attempt's status stands.
	retried bool
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// Overloaded reports UNAVAILABLE, RESOURCE_EXHAUSTED and DEADLINE_EXCEEDED,
// which retry.Throttle counts as rejections by the backend.
func (e *attemptError) Overloaded() bool {
	return !e.local && (e.code == codes.Unavailable || e.code == codes.ResourceExhausted || e.code == codes.DeadlineExceeded)
}

// sendTooLarge reports whether st, an attempt's status, is grpc-go's own
// error for a request message larger than grpc.MaxCallSendMsgSize:
// RESOURCE_EXHAUSTED, raised on the client before the message is sent, and
// the same at every attempt. grpc-go marks it by its text only; a test
// against grpc-go keeps the two in step.
func sendTooLarge(st *status.Status) bool {
	return st.Code() == codes.ResourceExhausted && strings.HasPrefix(st.Message(), "trying to send message larger than max")
}

// classify turns the error of an attempt into what the retry loop should
// see: a retryable error (perhaps with a server wait through retry.ServerWait)
// or a retry.Permanent one. ctx is the caller's context; headers reports
// that the attempt received response headers, which commit the call (gRFC
// A6: only an attempt that got none, a trailers-only response or no
// response at all, may be retried).
//
// A retryable error is returned as such even when ctx has ended: the loop
// then stops on the context by itself (retry.ReasonContext), and result
// reports the context's end. A code that is not retried is not marked
// permanent once ctx has ended either (it is then most likely grpc-go's
// CANCELLED or DEADLINE_EXCEEDED for the context's end), so that the loop
// reports ReasonContext too; its status stands (see result).
func (c *config) classify(ctx context.Context, p *retry.Policy, err error, trailer metadata.MD, headers bool) error {
	st, _ := status.FromError(err) // once: status.Code would convert it again
	code := st.Code()
	e := &attemptError{err: err, code: code}
	// Policy.Retryable, when set, replaces the code rule (WithCodes), as
	// it replaces retry.Do's default rule: the loop asks it.
	if p.Retryable == nil && !c.retriesCode(code) && !(code == codes.DeadlineExceeded && p.AttemptTimeout > 0) {
		if ctx.Err() != nil {
			return e // the loop stops on the caller's context by itself
		}
		return retry.Permanent(e)
	}
	e.retried = true
	if sendTooLarge(st) {
		// Every attempt would fail alike, and so would an enclosing
		// layer's: no layer should retry it.
		e.local, e.refused = true, true
		return retry.Permanent(e)
	}
	if headers {
		// The server's application answered: it may have applied the
		// call, and the error may be the client's own (a response over
		// MaxCallRecvMsgSize gives RESOURCE_EXHAUSTED).
		e.refused = true
		return retry.Permanent(e)
	}
	d, hint, stop := serverWaitOf(st, trailer)
	switch {
	case stop:
		e.refused = true
		return retry.Permanent(e)
	case !hint || c.maxServerWait < 0:
		return e
	case serverwait.Beyond(d, c.maxServerWait):
		// More than we honour, or more than a Duration holds (the parsers
		// saturate), which is beyond any cap: give the error back now,
		// telling enclosing layers, which may not see the trailer, not to
		// retry sooner than the server asked either.
		e.refused = true
		return retry.Permanent(e)
	}
	return retry.ServerWait(e, serverwait.Jitter(d))
}

// maxDuration is the longest time.Duration, about 292 years: where
// ParsePushback and RetryInfo's AsDuration saturate.
const maxDuration = time.Duration(1<<63 - 1)

// serverWaitOf reads the server's wait from the pushback trailer and the
// RetryInfo detail of st, the attempt's status, taking the larger when both
// are there. stop reports a negative or malformed pushback, or a trailer
// with more than one pushback value, after which grpc-go's own retry does
// not retry either.
func serverWaitOf(st *status.Status, trailer metadata.MD) (d time.Duration, hint, stop bool) {
	if v := trailer.Get(TrailerPushback); len(v) > 0 {
		if len(v) > 1 {
			return 0, false, true
		}
		pd, ok := ParsePushback(v[0])
		if !ok {
			return 0, false, true
		}
		d, hint = pd, true
	}
	if rd, ok := retryInfoDelay(st); ok {
		d, hint = max(d, rd), true
	}
	return d, hint, false
}

// maxPushbackMillis bounds the parsed value so that the conversion to a
// time.Duration cannot overflow.
const maxPushbackMillis = int64(maxDuration / time.Millisecond)

// ParsePushback parses a grpc-retry-pushback-ms value (gRFC A6): a
// non-negative decimal integer of milliseconds, returned with ok true.
// Negative, empty, signed with '+', fractional and other malformed values
// give ok false, which gRFC A6 defines as "do not retry". A value too large
// for a time.Duration saturates at the largest Duration. It never panics.
func ParsePushback(v string) (d time.Duration, ok bool) {
	if v == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		ch := v[i]
		if ch < '0' || ch > '9' {
			return 0, false
		}
		if n > maxPushbackMillis {
			continue // keep validating the rest, the value saturates
		}
		n = n*10 + int64(ch-'0')
	}
	if n > maxPushbackMillis {
		return maxDuration, true
	}
	return time.Duration(n) * time.Millisecond, true
}

// retryInfoDelay returns the retry_delay of a google.rpc.RetryInfo detail
// in st. An invalid delay is ignored; a negative one counts as 0. A status
// without details costs no allocation (Details, unlike Proto, does not
// clone the status).
func retryInfoDelay(st *status.Status) (time.Duration, bool) {
	for _, det := range st.Details() {
		ri, ok := det.(*errdetails.RetryInfo)
		if !ok || ri.GetRetryDelay() == nil || ri.GetRetryDelay().CheckValid() != nil {
			continue
		}
		return max(ri.GetRetryDelay().AsDuration(), 0), true
	}
	return 0, false
}

// result turns what retry.Do returned into the interceptor's error. When
// the loop stopped after the first attempt without retrying anything
// (status not retried, an inner layer already gave up, the caller's context
// ended that attempt), the attempt's own error is returned unchanged,
// exactly as without the interceptor. When the caller's context ended the
// call after an attempt that failed with a code that is retried (in the
// wait before a retry, or before it began), or before any attempt was
// sent, the error is a contextError: it matches the context's error and
// has the context's status, as grpc-go's own retry reports it. Otherwise,
// and when the server's answer refused a retry that the code allowed (a
// "do not retry" pushback, response headers), the *retry.Error is
// returned: it wraps the last status (status.Code and status.FromError see
// it) and tells enclosing retry loops (retry.Do, retrygax, another
// interceptor) not to retry again.
func result(err error) error {
	if err == nil {
		return nil
	}
	var re *retry.Error
	if !errors.As(err, &re) {
		return err
	}
	var ae *attemptError
	sent := errors.As(re.Err, &ae)
	if re.Reason == retry.ReasonContext && (!sent || ae.retried && ae.code != contextCode(re.Cause)) {
		return &contextError{re: re}
	}
	if re.Attempts != 1 {
		return err
	}
	switch re.Reason {
	case retry.ReasonPermanent, retry.ReasonExhausted, retry.ReasonContext:
		if sent && !ae.refused {
			return ae.err
		}
	}
	return err
}

// retriedCode reports whether err, a classified attempt error, has a code
// that the interceptor retries (see attemptError.retried). An attempt that
// failed with any other code ends the call with its status, which nothing
// needs to hear of: not the loop, not the layers above.
func retriedCode(err error) bool {
	var ae *attemptError
	return errors.As(err, &ae) && ae.retried
}

// original returns the error an attempt got from grpc, without the
// interceptor's wrappers.
func original(err error) error {
	var ae *attemptError
	if errors.As(err, &ae) {
		return ae.err
	}
	return err
}
