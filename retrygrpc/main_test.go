package retrygrpc_test

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygrpc"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Full method names of the test service.
const (
	methodUnary = "/retrygrpc.test.Echo/Unary"
	methodOther = "/retrygrpc.test.Echo/Other"
	methodBidi  = "/retrygrpc.test.Echo/Bidi"
)

// echoServer is a real gRPC service on loopback whose answers each test
// scripts. It counts what it saw.
type echoServer struct {
	// unary answers attempt n (1-based, per method) of a unary call.
	unary func(ctx context.Context, n int, in string) (string, error)
	// bidi serves attempt n of a stream.
	bidi func(n int, stream grpc.ServerStream) error

	mu       sync.Mutex
	calls    map[string]int
	previous []string // grpc-previous-rpc-attempts of each attempt, "" when absent
}

func (s *echoServer) count(ctx context.Context, method string) int {
	md, _ := metadata.FromIncomingContext(ctx)
	prev := ""
	if v := md.Get("grpc-previous-rpc-attempts"); len(v) > 0 {
		prev = v[0]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = map[string]int{}
	}
	s.calls[method]++
	s.previous = append(s.previous, prev)
	return s.calls[method]
}

// Calls returns how many attempts of method the server received.
func (s *echoServer) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

func (s *echoServer) Previous() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.previous...)
}

func unaryHandler(method string) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		s := srv.(*echoServer)
		n := s.count(ctx, method)
		if s.unary == nil {
			return wrapperspb.String(in.GetValue()), nil
		}
		out, err := s.unary(ctx, n, in.GetValue())
		if err != nil {
			return nil, err
		}
		return wrapperspb.String(out), nil
	}
}

var echoDesc = grpc.ServiceDesc{
	ServiceName: "retrygrpc.test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Unary", Handler: unaryHandler(methodUnary)},
		{MethodName: "Other", Handler: unaryHandler(methodOther)},
	},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Bidi",
		ServerStreams: true,
		ClientStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			s := srv.(*echoServer)
			n := s.count(stream.Context(), methodBidi)
			if s.bidi == nil {
				return echoAll(stream)
			}
			return s.bidi(n, stream)
		},
	}},
}

// echoAll answers every message with itself until the client closes.
func echoAll(stream grpc.ServerStream) error {
	for {
		in := new(wrapperspb.StringValue)
		if err := stream.RecvMsg(in); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if err := stream.SendMsg(in); err != nil {
			return err
		}
	}
}

// listen starts s on a free loopback port and returns its address and a
// function that stops it.
func listen(s *echoServer) (string, func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer()
	srv.RegisterService(&echoDesc, s)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(lis) }()
	return lis.Addr().String(), func() { srv.Stop(); <-done }
}

// serve starts s on a free loopback port and returns a connection to it
// made with dopts (insecure credentials are added). Both stop at the end of
// the test.
func serve(t testing.TB, s *echoServer, dopts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, lis, lis.Addr().String(), s, dopts)
}

// serveInBubble is serve over an in-memory connection (grpc's bufconn),
// for tests inside a testing/synctest bubble: its fake clock advances only
// while every goroutine of the bubble is blocked on the bubble's own
// channels, timers or conditions, which a read on a TCP socket is not. It
// must be called inside the bubble; the cleanup runs there too.
func serveInBubble(t *testing.T, s *echoServer, dopts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 16)
	dial := func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }
	return serveOn(t, lis, "passthrough:///bufconn", s, append([]grpc.DialOption{grpc.WithContextDialer(dial)}, dopts...))
}

// serveOn serves s on lis and returns a connection to target made with
// dopts (insecure credentials are added); both stop at the end of the test.
func serveOn(t testing.TB, lis net.Listener, target string, s *echoServer, dopts []grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	return serveWith(t, lis, target, s, nil, dopts)
}

// serveWith is serveOn with server options.
func serveWith(t testing.TB, lis net.Listener, target string, s *echoServer, sopts []grpc.ServerOption, dopts []grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	srv := grpc.NewServer(sopts...)
	srv.RegisterService(&echoDesc, s)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(lis) }()
	cc, err := grpc.NewClient(target, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dopts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		srv.Stop()
		<-done
	})
	return cc
}

// serveWindows is serve with fixed 64 KiB flow-control windows on both
// sides, which turns off grpc-go's BDP window growth: a sender that
// nobody reads blocks after 64 KiB.
func serveWindows(t *testing.T, s *echoServer, dopts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveWith(t, lis, lis.Addr().String(), s,
		[]grpc.ServerOption{grpc.InitialWindowSize(1 << 16), grpc.InitialConnWindowSize(1 << 16)},
		append(dopts, grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16)))
}

// streamEcho opens a bidi stream, sends "a", reads to the end and fails
// the test on any error.
func streamEcho(t *testing.T, ctx context.Context, cc *grpc.ClientConn) {
	t.Helper()
	cs, err := cc.NewStream(ctx, bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	sendAll(t, cs, "a")
	if _, err := recvAll(cs); err != nil {
		t.Fatal(err)
	}
}

// callEcho makes one unary call, or one bidi stream, that must succeed.
func callEcho(t *testing.T, ctx context.Context, cc *grpc.ClientConn, stream bool) {
	t.Helper()
	if stream {
		streamEcho(t, ctx, cc)
		return
	}
	if _, err := callUnary(ctx, cc, methodUnary); err != nil {
		t.Fatal(err)
	}
}

func callUnary(ctx context.Context, cc *grpc.ClientConn, method string, opts ...grpc.CallOption) (string, error) {
	out := new(wrapperspb.StringValue)
	err := cc.Invoke(ctx, method, wrapperspb.String("hello"), out, opts...)
	return out.GetValue(), err
}

// failFirst answers the first k attempts with err and then echoes.
func failFirst(k int, err error) func(context.Context, int, string) (string, error) {
	return func(_ context.Context, n int, in string) (string, error) {
		if n <= k {
			return "", err
		}
		return in, nil
	}
}

// withRetryInfo returns a status error of code c carrying RetryInfo d.
func withRetryInfo(c codes.Code, d time.Duration) error {
	st, err := status.New(c, "slow down").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

// withPushback answers the first k attempts with UNAVAILABLE and the
// pushback trailer v.
func withPushback(k int, v string) func(context.Context, int, string) (string, error) {
	return func(ctx context.Context, n int, in string) (string, error) {
		if n <= k {
			grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", v))
			return "", status.Error(codes.Unavailable, "pushed back")
		}
		return in, nil
	}
}

// countAttempts is a unary interceptor, chained below the retrying one,
// that counts the attempts it makes in n.
func countAttempts(n *atomic.Int32) grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		n.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	})
}

// dialOptions is retrygrpc.DialOptions for a test, which a refusal fails.
func dialOptions(t testing.TB, p retry.Policy, opts ...retrygrpc.Option) []grpc.DialOption {
	t.Helper()
	dopts, err := retrygrpc.DialOptions(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return dopts
}

// unaryInterceptor is retrygrpc.UnaryClientInterceptor for a test, which
// a refusal fails.
func unaryInterceptor(t testing.TB, p retry.Policy, opts ...retrygrpc.Option) grpc.UnaryClientInterceptor {
	t.Helper()
	ic, err := retrygrpc.UnaryClientInterceptor(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return ic
}

// streamInterceptor is retrygrpc.StreamClientInterceptor for a test, which
// a refusal fails.
func streamInterceptor(t testing.TB, p retry.Policy, opts ...retrygrpc.Option) grpc.StreamClientInterceptor {
	t.Helper()
	ic, err := retrygrpc.StreamClientInterceptor(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return ic
}

// unaryOnly installs the unary interceptor alone with p, as DialOptions
// would, for a p that DialOptions refuses for streams (an AttemptTimeout).
func unaryOnly(t testing.TB, p retry.Policy) []grpc.DialOption {
	t.Helper()
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unaryInterceptor(t, p)), grpc.WithDisableRetry()}
}
