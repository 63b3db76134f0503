package retrygax

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/googleapis/gax-go/v2/apierror"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"google.golang.org/api/googleapi"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// verdict is what an attempt's error says about retrying.
type verdict struct {
	retry     bool          // the status is one that is retried
	exhausted bool          // a lower retrykit layer already gave up
	hint      time.Duration // the server's least wait, when hasHint
	hasHint   bool
}

// judge reads err as gax returns it: an *apierror.APIError around a gRPC
// status or a *googleapi.Error, or anything a lower layer returned.
func (c *config) judge(err error, now time.Time) verdict {
	var v verdict
	if retry.IsExhausted(err) {
		v.exhausted = true
	}
	var gerr *googleapi.Error
	if errors.As(err, &gerr) {
		// REST. Checked first: an APIError made from a *googleapi.Error
		// also reports a gRPC status mapped from the HTTP code.
		if gerr.Header.Get(retryhttp.HeaderExhausted) != "" {
			v.exhausted = true
		}
		v.retry = c.httpStatus(gerr.Code)
		if ra := gerr.Header.Get("Retry-After"); ra != "" {
			if d, ok := retryhttp.ParseRetryAfter(ra, now); ok {
				v.hint, v.hasHint = d, true
			}
		}
	} else if s, ok := status.FromError(err); ok {
		code := s.Code()
		if sendTooLarge(s) {
			return v // every attempt would fail alike
		}
		v.retry = c.retriesCode(code)
	}
	if d, ok := retryInfo(err); ok {
		v.hint, v.hasHint = max(v.hint, d), true
	}
	return v
}

// sendTooLarge reports grpc-go's own error for a request message larger
// than grpc.MaxCallSendMsgSize: RESOURCE_EXHAUSTED, raised on the client
// before the message is sent, the same at every attempt, and no sign of an
// overloaded backend. grpc-go marks it by its text only; a test against
// grpc-go keeps the two in step.
func sendTooLarge(s *status.Status) bool {
	return s.Code() == codes.ResourceExhausted && strings.HasPrefix(s.Message(), "trying to send message larger than max")
}

// retryInfo returns the retry_delay of a google.rpc.RetryInfo in err's
// details (an APIError's parsed details, for both transports, or the gRPC
// status). An invalid delay is ignored; a negative one counts as 0.
func retryInfo(err error) (time.Duration, bool) {
	var ri *errdetails.RetryInfo
	var ae *apierror.APIError
	if errors.As(err, &ae) {
		ri = ae.Details().RetryInfo
	} else if s, ok := status.FromError(err); ok && len(s.Proto().GetDetails()) > 0 {
		for _, d := range s.Details() {
			if x, ok := d.(*errdetails.RetryInfo); ok {
				ri = x
				break
			}
		}
	}
	if ri.GetRetryDelay() == nil || ri.GetRetryDelay().CheckValid() != nil {
		return 0, false
	}
	return max(ri.GetRetryDelay().AsDuration(), 0), true
}

// contextCause returns the context error behind err, an attempt's error
// that is not retried: the context's own error (REST), or, from gRPC,
// CANCELLED or DEADLINE_EXCEEDED, with which grpc-go ends an attempt whose
// context ended (a Retryer sees no context: a server's own CANCELLED or
// DEADLINE_EXCEEDED is read the same way). Nil for anything else.
func contextCause(err error) error {
	switch {
	case errors.Is(err, context.Canceled):
		return context.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded
	}
	var gerr *googleapi.Error
	if errors.As(err, &gerr) {
		return nil // REST: its status (a 504, say) maps to a gRPC code, not a context's end
	}
	switch status.Code(err) {
	case codes.Canceled:
		return context.Canceled
	case codes.DeadlineExceeded:
		return context.DeadlineExceeded
	}
	return nil
}

// endedByContext returns the context error that ended the lower retry loop
// whose *retry.Error err holds (Reason retry.ReasonContext), or nil.
func endedByContext(err error) error {
	var re *retry.Error
	if errors.As(err, &re) && re.Reason == retry.ReasonContext {
		return re.Cause
	}
	return nil
}
