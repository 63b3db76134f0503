package retrygax

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// FuzzJudge: whatever a REST error body, its status and its Retry-After say,
// or whatever RetryInfo a gRPC status carries, judge never panics and never
// reads a negative wait.
func FuzzJudge(f *testing.F) {
	f.Add(429, "1", []byte(`{"error":{"code":429,"message":"x","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.05s"}]}}`), int64(0), int32(0), false)
	f.Add(503, "Fri, 02 Jan 2026 03:04:15 GMT", []byte(`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"-315576000000s"}]}}`), int64(0), int32(0), false)
	f.Add(503, "", []byte(`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"315576000000.999999999s"}]}}`), int64(0), int32(0), false)
	f.Add(0, "", []byte(nil), int64(315576000000), int32(999999999), true)
	f.Add(0, "", []byte(nil), int64(-5), int32(-1), true)
	f.Add(0, "", []byte(nil), int64(9223372036854775807), int32(0), true)
	c := newConfig(nil)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, code int, retryAfter string, body []byte, sec int64, nanos int32, grpcErr bool) {
		var err error
		if grpcErr {
			st := status.New(codes.Unavailable, "x")
			if s, e := st.WithDetails(&errdetails.RetryInfo{RetryDelay: &durationpb.Duration{Seconds: sec, Nanos: nanos}}); e == nil {
				st = s
			}
			err = st.Err()
			if ae, ok := apierror.FromError(err); ok {
				err = ae
			}
		} else {
			if code < 400 || code > 599 {
				code = 400 + (code%200+200)%200
			}
			h := http.Header{}
			if retryAfter != "" {
				h.Set("Retry-After", retryAfter)
			}
			err = googleapi.CheckResponseWithBody(&http.Response{StatusCode: code, Header: h}, body)
			if ae, ok := apierror.FromError(err); ok {
				err = ae
			}
			var gerr *googleapi.Error
			if !errors.As(err, &gerr) {
				t.Fatalf("status %d: %T is no *googleapi.Error", code, err)
			}
		}
		v := c.judge(err, now)
		if v.hint < 0 || !v.hasHint && v.hint != 0 {
			t.Fatalf("judge(%v) = %+v", err, v)
		}
	})
}
