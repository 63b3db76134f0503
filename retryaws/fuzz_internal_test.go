package retryaws

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// FuzzAttemptHeader: any Amz-Sdk-Request value parses without a panic to
// non-negative numbers, and a well-formed one to its numbers.
func FuzzAttemptHeader(f *testing.F) {
	for _, s := range []string{"attempt=1; max=3", "attempt=2", "attempt=1; max=0; ttl=20261204T031500Z", "", "attempt=-1", "max=99999999999999999999", ";;=;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		a, m := parseAttemptHeader(h)
		if a < 0 || m < 0 {
			t.Fatalf("parseAttemptHeader(%q) = %d, %d", h, a, m)
		}
	})
	if a, m := parseAttemptHeader("attempt=2; max=5"); a != 2 || m != 5 {
		f.Fatalf("attempt=2; max=5 read as %d, %d", a, m)
	}
}

// FuzzRetryAfter: any x-amz-retry-after value gives no wait or a
// non-negative one, which is the header's milliseconds when it is a
// number, saturated rather than overflowed.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"1500", "0", "-1", "soon", "9223372036854775807", "1e3", " 5", "+7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		resp := &http.Response{StatusCode: 503, Header: http.Header{"X-Amz-Retry-After": {h}}}
		err := &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: resp}, Err: errors.New("x")}
		d, ok := retryAfter(err)
		if !ok {
			return
		}
		if d < 0 {
			t.Fatalf("retryAfter(%q) = %v", h, d)
		}
		if ms, perr := strconv.ParseInt(h, 10, 64); perr == nil && ms < int64(1<<63-1)/int64(time.Millisecond) && d != time.Duration(ms)*time.Millisecond {
			t.Fatalf("retryAfter(%q) = %v, want %d ms", h, d, ms)
		}
	})
}
