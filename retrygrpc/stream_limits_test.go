package retrygrpc_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Promise (WithMaxBuffer, DefaultMaxBuffer): the replay buffer holds at
// most that many bytes of request messages, "as in gRFC A6", and "a stream
// whose messages pass it commits". A message whose fields all hold their
// default values encodes to zero bytes (proto.Size 0) but still costs a
// gRPC frame on the wire (5 bytes, which grpc-go's own retry buffer
// counts) and a clone in memory: counting it as nothing lets a client
// stream of such messages (heartbeats, empty acks) grow the buffer without
// bound and replay all of them, never committing.
func TestEmptyMessagesBounded(t *testing.T) {
	const sent = 1000 // 5 000 bytes of frames against a 100-byte buffer
	rec := new(recorder)
	s := &echoServer{bidi: func(n int, st grpc.ServerStream) error {
		for {
			in := new(wrapperspb.StringValue)
			if err := st.RecvMsg(in); err == io.EOF {
				break
			} else if err != nil {
				return err
			}
			rec.add(n, in.GetValue())
		}
		if n == 1 {
			return status.Error(codes.Unavailable, "restarting")
		}
		return nil
	}}
	cc := serve(t, s, dialOptions(t, fast, retrygrpc.WithMaxBuffer(100))...)
	cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	for range sent {
		if err := cs.SendMsg(&wrapperspb.StringValue{}); err != nil {
			break // the stream may have committed and failed
		}
	}
	cs.CloseSend()
	_, err = recvAll(cs)
	if n := s.Calls(methodBidi); n != 1 || status.Code(err) != codes.Unavailable {
		t.Fatalf("server saw %d attempts (attempt 2 received %d messages), RecvMsg = %v; want 1 attempt and UNAVAILABLE: "+
			"%d messages do not fit in a 100-byte buffer, the stream must have committed", n, len(rec.get(2)), err, sent)
	}
}

// Promise (UnaryClientInterceptor): after retries the error is "a
// *retry.Error wrapping the last attempt's status error, so that
// status.Code(err) is the last attempt's code". When a Throttle rejects the
// retries left after an UNAVAILABLE, the loop's last error is
// retry.ErrThrottled, which holds no status: status.Code(err) became
// UNKNOWN although the only answer the server gave was UNAVAILABLE (which
// grpc-go's own retry throttling, gRFC A6, returns as is).
func TestThrottledRetryKeepsStatus(t *testing.T) {
	p, th := throttledPolicy(t)
	s := &echoServer{unary: func(context.Context, int, string) (string, error) {
		th.Override(retry.ThrottleRejectAll) // reject every attempt from now on
		return "", status.Error(codes.Unavailable, "overloaded")
	}}
	cc := serve(t, s, dialOptions(t, p)...)
	_, err := callUnary(t.Context(), cc, methodUnary)
	if !errors.Is(err, retry.ErrThrottled) {
		t.Fatalf("err = %v, want the loop's throttled *retry.Error", err)
	}
	if n := s.Calls(methodUnary); n != 1 {
		t.Fatalf("server saw %d attempts, want 1", n)
	}
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "overloaded") {
		t.Fatalf("status of %v = %v %q, want the server's UNAVAILABLE %q", err, st.Code(), st.Message(), "overloaded")
	}
}

// The same for a stream that fails before committing.
func TestThrottledStreamRetryKeepsStatus(t *testing.T) {
	p, th := throttledPolicy(t)
	s := &echoServer{bidi: func(int, grpc.ServerStream) error {
		th.Override(retry.ThrottleRejectAll) // reject every attempt from now on
		return status.Error(codes.Unavailable, "overloaded")
	}}
	cc := serve(t, s, dialOptions(t, p)...)
	cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	sendAll(t, cs, "a")
	_, err = recvAll(cs)
	if !errors.Is(err, retry.ErrThrottled) || s.Calls(methodBidi) != 1 {
		t.Fatalf("err = %v after %d attempts, want the loop's throttled *retry.Error after 1", err, s.Calls(methodBidi))
	}
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "overloaded") {
		t.Fatalf("status of %v = %v %q, want the server's UNAVAILABLE %q", err, st.Code(), st.Message(), "overloaded")
	}
}

// throttledPolicy returns fast with 3 attempts and a Throttle of its own,
// which the test's server makes reject every attempt after the first.
func throttledPolicy(t *testing.T) (retry.Policy, *retry.Throttle) {
	th, err := retry.NewThrottle(retry.ThrottleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p := fast
	p.MaxAttempts = 3
	p.Throttle = th
	return p, th
}
