package retrygrpc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// checkStream stands for an interceptor below the retrying one that
// rejects a response, as a response validator does: its RecvMsg fails
// without ending the stream below.
type checkStream struct{ grpc.ClientStream }

func (c *checkStream) RecvMsg(m any) error {
	if err := c.ClientStream.RecvMsg(m); err != nil {
		return err
	}
	return status.Error(codes.InvalidArgument, "response failed validation")
}

// An error that is not retried returns at once from RecvMsg, even while a
// SendMsg on the same stream is blocked on flow control (the server sends
// and never reads; small windows): only an error that would start a retry
// waits for a SendMsg in flight.
func TestRecvErrorNotRetriedDoesNotWaitForSend(t *testing.T) {
	s := &echoServer{bidi: func(_ int, st grpc.ServerStream) error {
		for range 1000 {
			if err := st.SendMsg(wrapperspb.String(strings.Repeat("r", 30000))); err != nil {
				return err
			}
		}
		return nil
	}}
	check := grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &checkStream{cs}, nil
	})
	cc := serveWindows(t, s, append(dialOptions(t, fast), check)...)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel) // before the connection closes
	cs, err := cc.NewStream(ctx, bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range 25 { // 250 kB: under the 256 KiB replay buffer
			if cs.SendMsg(wrapperspb.String(strings.Repeat("x", 10000))) != nil {
				return
			}
		}
	}()
	time.Sleep(200 * time.Millisecond) // let the windows fill
	recvErr := make(chan error, 1)
	go func() { recvErr <- cs.RecvMsg(new(wrapperspb.StringValue)) }()
	select {
	case err := <-recvErr:
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("RecvMsg: %v; want the validator's InvalidArgument", err)
		}
	case <-time.After(5 * time.Second):
		cancel()
		t.Fatalf("RecvMsg still blocked 5 s after the validator failed; it returned %v once the context was cancelled", <-recvErr)
	}
}
