package retryaws

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// The SDK's own classifiers, as its standard retryer uses them.
var (
	sdkRetryable = awsretry.IsErrorRetryables(awsretry.DefaultRetryables)
	sdkThrottle  = awsretry.IsErrorThrottles(awsretry.DefaultThrottles)
)

// outcome says what is known of whether a failed attempt was applied.
type outcome uint8

const (
	// notApplied: the service refused the request without applying it
	// (throttling, 429, 503, a 4xx, a clock-skew refusal), or it was never
	// sent (dial error, an error of the SDK before sending).
	notApplied outcome = iota
	// maybeApplied: the request was sent and the reply was lost or says
	// nothing about whether it was applied (reset, timeout, context ended,
	// 500, 502, 504, a 2xx whose body could not be read).
	maybeApplied
)

// verdict is what the Retryer makes of an attempt's error.
type verdict struct {
	retry   bool          // the SDK's classifiers retry it
	safe    bool          // repeating it cannot apply a write twice (or the operation may be repeated)
	maybe   bool          // the attempt may have been applied and the operation writes (MarkSafe or not)
	hint    time.Duration // x-amz-retry-after
	hasHint bool
}

// judge classifies err, the error of an attempt of an operation of class
// c (marked: the call's context carries MarkSafe).
func judge(err error, c Class, marked bool) verdict {
	var v verdict
	o := applied(err)
	v.maybe = o == maybeApplied && c != ReadOnly
	v.retry = sdkRetryable.IsErrorRetryable(err).Bool()
	v.safe = o == notApplied || c != Unsafe || marked
	v.hint, v.hasHint = retryAfter(err)
	return v
}

// applied tells what is known of whether the attempt that failed with err
// was applied.
func applied(err error) outcome {
	// The transport failed before any answer. The SDK still wraps this
	// error in a ResponseError, around an empty response of status 0, so
	// it is looked for first.
	var se *smithyhttp.RequestSendError
	if errors.As(err, &se) {
		var op *net.OpError
		if errors.As(se.Err, &op) && op.Op == "dial" {
			return notApplied // no connection was made
		}
		return maybeApplied
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.Response != nil && re.Response.Response != nil && re.HTTPStatusCode() != 0 {
		code := re.HTTPStatusCode()
		switch {
		case sdkThrottle.IsErrorThrottle(err).Bool(), code == 429, code == 503:
			return notApplied
		case code >= 400 && code < 500:
			return notApplied // refused: validation, conditions, auth, clock skew
		}
		return maybeApplied // 5xx (S3's 200 with an error body is rewritten as 500), 2xx, 3xx
	}
	var ce interface{ CanceledError() bool }
	if errors.As(err, &ce) && ce.CanceledError() || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return maybeApplied
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return maybeApplied // a response body cut short while reading it
	}
	var de *smithy.DeserializationError
	if errors.As(err, &de) {
		return maybeApplied // an answer came and could not be read
	}
	return notApplied // the SDK failed before sending (signing, endpoint, credentials)
}

// retryAfter returns the x-amz-retry-after header of the response that
// err carries, read as the SDK reads it (an integer of milliseconds, at
// least 0).
func retryAfter(err error) (time.Duration, bool) {
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) || re.Response == nil || re.Response.Response == nil {
		return 0, false
	}
	h := re.Response.Header.Get("X-Amz-Retry-After")
	if h == "" {
		return 0, false
	}
	ms, perr := strconv.ParseInt(h, 10, 64)
	if errors.Is(perr, strconv.ErrRange) && ms > 0 {
		return 1<<63 - 1, true // more digits than an int64 holds: saturated
	}
	if perr != nil || ms < 0 {
		return 0, false
	}
	if ms > int64(1<<63-1)/int64(time.Millisecond) {
		return 1<<63 - 1, true
	}
	return time.Duration(ms) * time.Millisecond, true
}

// overloaded reports whether err says the service could not take the
// request now (throttling, 429, 503, a timeout): a retry.Throttle counts it
// as a rejection by its default rule.
func overloaded(err error) bool {
	if sdkThrottle.IsErrorThrottle(err) == aws.TrueTernary {
		return true
	}
	var code interface{ HTTPStatusCode() int }
	if errors.As(err, &code) && (code.HTTPStatusCode() == 429 || code.HTTPStatusCode() == 503) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded)
}
