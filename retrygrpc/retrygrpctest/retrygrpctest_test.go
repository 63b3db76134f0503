package retrygrpctest_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygrpc"
	"github.com/retrykit/retry/retrygrpc/retrygrpctest"
	"github.com/retrykit/retry/retrytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const method = "/retrygrpctest.test.Counter/Add"

// counter is a one-method service: Add adds 1 to its total and returns it.
type counter struct{ n atomic.Int64 }

func (c *counter) desc() *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "retrygrpctest.test.Counter",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Add", Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(context.Context, any) (any, error) { return wrapperspb.Int64(c.n.Add(1)), nil }
			if ic == nil {
				return h(ctx, in)
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{FullMethod: method}, h)
		}}},
	}
}

// serve starts the counter behind s on a bufconn listener and returns a
// client connection with the policy's retry interceptors; both stop when
// the test ends.
func serve(t *testing.T, s *retrygrpctest.Server, p retry.Policy) (*grpc.ClientConn, *counter) {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.UnaryInterceptor(s.UnaryInterceptor))
	c := &counter{}
	srv.RegisterService(c.desc(), c)
	go srv.Serve(s.Listener(lis))
	// DialOptions refuses an AttemptTimeout, which streams cannot honour:
	// a policy with one gets the unary interceptor alone.
	var dopts []grpc.DialOption
	if p.AttemptTimeout != 0 {
		ic, err := retrygrpc.UnaryClientInterceptor(p)
		if err != nil {
			t.Fatal(err)
		}
		dopts = []grpc.DialOption{grpc.WithChainUnaryInterceptor(ic), grpc.WithDisableRetry()}
	} else {
		var err error
		if dopts, err = retrygrpc.DialOptions(p); err != nil {
			t.Fatal(err)
		}
	}
	cc, err := grpc.NewClient("passthrough:///bufconn", append(dopts,
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		srv.Stop()
	})
	return cc, c
}

func add(ctx context.Context, cc *grpc.ClientConn) (int64, error) {
	out := new(wrapperspb.Int64Value)
	err := cc.Invoke(ctx, method, wrapperspb.String("x"), out)
	return out.GetValue(), err
}

// TestScriptedHints: UNAVAILABLE with a pushback, RESOURCE_EXHAUSTED with a
// RetryInfo, then the service: the client waits as the server asked, and
// the service runs once. Inside a synctest bubble the 3 s of waits take no
// time.
func TestScriptedHints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := retrygrpctest.NewServer(
			retrygrpctest.Reply{Code: codes.Unavailable, Pushback: "1000"},
			retrygrpctest.Reply{Code: codes.ResourceExhausted, RetryDelay: 2 * time.Second},
			retrygrpctest.Reply{},
		)
		var rec retrytest.Recorder
		cc, c := serve(t, s, retry.Policy{Initial: 10 * time.Millisecond, Jitter: retry.NoJitter(), Observer: &rec})
		start := time.Now()
		v, err := add(t.Context(), cc)
		if err != nil || v != 1 {
			t.Fatalf("Add: %d, %v", v, err)
		}
		// retrygrpc adds up to a tenth to a server's wait, so that clients
		// told the same wait do not come back together.
		if got := rec.Waits(); len(got) != 2 || got[0] < time.Second || got[0] > 1100*time.Millisecond ||
			got[1] < 2*time.Second || got[1] > 2200*time.Millisecond {
			t.Fatalf("waits %v; want the server's 1s and 2s, plus at most a tenth", got)
		}
		if took := time.Since(start); took < 3*time.Second {
			t.Fatalf("took %v of virtual time; want at least 3s", took)
		}
		if got := s.Count(method); got != (retrytest.Count{Requests: 3, Applied: 1}) || c.n.Load() != 1 {
			t.Fatalf("server %+v, service ran %d times", got, c.n.Load())
		}
	})
}

// TestLostReply: the service runs, the connection closes before the
// answer: the client sees UNAVAILABLE, and a retrying client runs the
// service again (gRPC cannot tell this from a refusal).
func TestLostReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := retrygrpctest.NewServer(retrygrpctest.Reply{Lost: true}, retrygrpctest.Reply{})
		cc, c := serve(t, s, retry.Policy{MaxAttempts: 1})
		if _, err := add(t.Context(), cc); status.Code(err) != codes.Unavailable {
			t.Fatalf("lost reply: %v; want UNAVAILABLE", err)
		}
		if got := s.Total(); got != (retrytest.Count{Requests: 1, Applied: 1}) || c.n.Load() != 1 {
			t.Fatalf("server %+v, service ran %d times; want 1 applied", got, c.n.Load())
		}
		if v, err := add(t.Context(), cc); err != nil || v != 2 {
			t.Fatalf("after the lost reply: %d, %v; want 2 (the connection is made again)", v, err)
		}
	})
}

// TestDoNotRetry: a negative pushback stops the retries.
func TestDoNotRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := retrygrpctest.NewServer(retrygrpctest.Reply{Code: codes.Unavailable, Message: "later", Pushback: "-1"})
		cc, c := serve(t, s, retry.Policy{})
		if _, err := add(t.Context(), cc); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "later") {
			t.Fatalf("%v; want the scripted UNAVAILABLE", err)
		}
		if got := s.Total(); got != (retrytest.Count{Requests: 1}) || c.n.Load() != 0 {
			t.Fatalf("server %+v, service ran %d times; want 1 attempt, none applied", got, c.n.Load())
		}
	})
}

// TestLatencyAndKey: an attempt slower than the attempt timeout is not
// applied and is retried; Key groups the attempts of every method as one
// call.
func TestLatencyAndKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := retrygrpctest.NewServer()
		s.Key = func(context.Context, string) string { return "all" }
		s.Script("all", retrygrpctest.Reply{Latency: time.Minute}, retrygrpctest.Reply{Latency: time.Second})
		cc, c := serve(t, s, retry.Policy{AttemptTimeout: 10 * time.Second, Initial: time.Second, Jitter: retry.NoJitter()})
		start := time.Now()
		if v, err := add(t.Context(), cc); err != nil || v != 1 {
			t.Fatalf("Add: %d, %v", v, err)
		}
		if took := time.Since(start); took != 12*time.Second {
			t.Fatalf("took %v; want 12s (10s cut short, 1s wait, 1s answer)", took)
		}
		if got := s.Count("all"); got != (retrytest.Count{Requests: 2, Applied: 1}) || c.n.Load() != 1 || s.Count(method) != (retrytest.Count{}) {
			t.Fatalf("server %+v, service ran %d times", got, c.n.Load())
		}
	})
}

// TestStream: a stream refused when it opens is retried by the stream
// interceptor, and the service's handler runs once.
func TestStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := retrygrpctest.NewServer(retrygrpctest.Reply{Code: codes.Unavailable, Pushback: "500"}, retrygrpctest.Reply{})
		const streamMethod = "/retrygrpctest.test.Echo/Stream"
		var opened atomic.Int64
		lis := bufconn.Listen(1 << 20)
		srv := grpc.NewServer(grpc.StreamInterceptor(s.StreamInterceptor))
		srv.RegisterService(&grpc.ServiceDesc{ServiceName: "retrygrpctest.test.Echo", HandlerType: (*any)(nil),
			Streams: []grpc.StreamDesc{{StreamName: "Stream", ServerStreams: true, ClientStreams: true,
				Handler: func(_ any, ss grpc.ServerStream) error {
					opened.Add(1)
					in := new(wrapperspb.StringValue)
					if err := ss.RecvMsg(in); err != nil {
						return err
					}
					return ss.SendMsg(in)
				}}}}, struct{}{})
		go srv.Serve(s.Listener(lis))
		var rec retrytest.Recorder
		dopts, err := retrygrpc.DialOptions(retry.Policy{Observer: &rec})
		if err != nil {
			t.Fatal(err)
		}
		cc, err := grpc.NewClient("passthrough:///bufconn", append(dopts,
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close(); srv.Stop() })
		st, err := cc.NewStream(t.Context(), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, streamMethod)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(wrapperspb.String("hi")); err != nil {
			t.Fatal(err)
		}
		st.CloseSend()
		out := new(wrapperspb.StringValue)
		if err := st.RecvMsg(out); err != nil || out.GetValue() != "hi" {
			t.Fatalf("RecvMsg: %q, %v", out.GetValue(), err)
		}
		if got := s.Count(streamMethod); got != (retrytest.Count{Requests: 2, Applied: 1}) || opened.Load() != 1 || rec.Attempts() != 2 {
			t.Fatalf("server %+v, handler ran %d times, recorded %s", got, opened.Load(), &rec)
		}
		if w := rec.Waits(); len(w) != 1 || w[0] < 500*time.Millisecond {
			t.Fatalf("waits %v; want the server's 500ms at least", w)
		}
	})
}
