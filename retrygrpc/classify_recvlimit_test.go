package retrygrpc_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Issue 24, item 8, as documented (package doc, "What is retried"): a
// request larger than the server's grpc.MaxRecvMsgSize comes back
// RESOURCE_EXHAUSTED, trailers-only, before the unary handler runs, with
// nothing but its message to tell it from a handler's own
// RESOURCE_EXHAUSTED (no headers, no details, no trailer of its own: the
// test compares the two). Text is not matched (STYLE rule 18), so it is
// retried like any RESOURCE_EXHAUSTED; the remedy documented, the server's
// limit as grpc.MaxCallSendMsgSize on the client, makes grpc-go refuse the
// request on the client, which is not retried, and nothing is sent.
func TestServerRecvLimitIsRetriedUnlessTheClientKnowsIt(t *testing.T) {
	const limit = 1024
	big := strings.Repeat("x", 2*limit)
	s := &echoServer{unary: func(context.Context, int, string) (string, error) {
		return "", status.Error(codes.ResourceExhausted, "quota")
	}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var attempts atomic.Int32 // attempts that the interceptor made
	cc := serveWith(t, lis, lis.Addr().String(), s, []grpc.ServerOption{grpc.MaxRecvMsgSize(limit)},
		append(dialOptions(t, fast), countAttempts(&attempts)))

	// What the client sees, without the interceptor's view: the bare
	// connection below it (a second one, no interceptor).
	bare, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	type seen struct {
		code     codes.Code
		header   metadata.MD
		trailer  metadata.MD
		details  int
		handlers int
	}
	look := func(in string) seen {
		var h, tr metadata.MD
		before := s.Calls(methodUnary)
		err := bare.Invoke(t.Context(), methodUnary, wrapperspb.String(in), new(wrapperspb.StringValue), grpc.Header(&h), grpc.Trailer(&tr))
		st := status.Convert(err)
		return seen{st.Code(), h, tr, len(st.Details()), s.Calls(methodUnary) - before}
	}
	limited, handler := look(big), look("small")
	if limited.code != codes.ResourceExhausted || limited.handlers != 0 || limited.header != nil {
		t.Fatalf("over the server's limit: %+v; want RESOURCE_EXHAUSTED, trailers-only, before the handler", limited)
	}
	if handler.code != limited.code || handler.handlers != 1 || handler.header != nil || handler.details != limited.details ||
		len(handler.trailer) != len(limited.trailer) {
		t.Fatalf("over the limit %+v, from the handler %+v: they differ beyond the message; the docs say they do not", limited, handler)
	}

	call := func(opts ...grpc.CallOption) error {
		return cc.Invoke(t.Context(), methodUnary, wrapperspb.String(big), new(wrapperspb.StringValue), opts...)
	}
	err = call()
	if n := attempts.Load(); n != int32(fast.MaxAttempts) || status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("%d attempts, err %v; want %d (retried as any RESOURCE_EXHAUSTED, as documented)", n, err, fast.MaxAttempts)
	}

	attempts.Store(0)
	before := s.Calls(methodUnary)
	err = call(grpc.MaxCallSendMsgSize(limit))
	if n := attempts.Load(); n != 1 || status.Code(err) != codes.ResourceExhausted || !retry.IsExhausted(err) || s.Calls(methodUnary) != before {
		t.Fatalf("with the server's limit as MaxCallSendMsgSize: %d attempts, err %v; want 1, refused on the client, not retried", n, err)
	}
}
