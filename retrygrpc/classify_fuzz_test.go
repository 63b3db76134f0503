package retrygrpc

import (
	"context"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// FuzzServerHints: whatever grpc-retry-pushback-ms trailer and RetryInfo a
// retryable status carries, classify never panics; a malformed or negative
// pushback stops the retries, and so does a trailer with two values,
// whatever they are (as in grpc-go); a retry it allows waits no less than either
// valid hint asks and no more than WithMaxServerWait plus its jitter.
func FuzzServerHints(f *testing.F) {
	f.Add("200", true, int64(0), int32(300_000_000), true, "", false)
	f.Add("-1", false, int64(1), int32(0), false, "10", false)
	f.Add("", false, int64(315576000000), int32(999999999), true, "", false)
	f.Add("99999999999999999999", true, int64(-1), int32(-5), true, "", false)
	f.Add("300000", true, int64(300), int32(1), true, "", false)
	f.Add("10", true, int64(0), int32(0), false, "-1", true)
	f.Add("10", true, int64(1), int32(0), true, "10", true)
	c := newConfig(nil)
	p := &retry.Policy{}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, pushback string, hasPushback bool, sec int64, nanos int32, hasInfo bool, second string, hasSecond bool) {
		st := status.New(codes.Unavailable, "x")
		if hasInfo {
			if s, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: &durationpb.Duration{Seconds: sec, Nanos: nanos}}); err == nil {
				st = s
			}
		}
		var md metadata.MD
		if hasPushback {
			md = metadata.Pairs(TrailerPushback, pushback)
			if hasSecond {
				md.Append(TrailerPushback, second)
			}
		}
		err := c.classify(ctx, p, st.Err(), md, false)
		if hasPushback && hasSecond {
			if !retry.IsPermanent(err) {
				t.Fatalf("pushback %q, %q: %v is retried", pushback, second, err)
			}
			return
		}
		pd, pok := ParsePushback(pushback)
		if hasPushback && !pok {
			if !retry.IsPermanent(err) {
				t.Fatalf("pushback %q: %v is retried", pushback, err)
			}
			return
		}
		if retry.IsPermanent(err) {
			return // a hint over the cap
		}
		d, _ := retry.ServerWaitOf(err)
		if d < 0 || d > c.maxServerWait+time.Second {
			t.Fatalf("pushback %q (%v), RetryInfo %v %d s %d ns: wait %v", pushback, hasPushback, hasInfo, sec, nanos, d)
		}
		if hasPushback && d < pd {
			t.Fatalf("pushback %q: wait %v, less than %v", pushback, d, pd)
		}
		if rd := (&durationpb.Duration{Seconds: sec, Nanos: nanos}); hasInfo && rd.CheckValid() == nil && d < rd.AsDuration() {
			t.Fatalf("RetryInfo %v: wait %v, less", rd.AsDuration(), d)
		}
	})
}
