package bench

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	grpcretry "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The gRPC workloads compare retry interceptors over a real loopback
// connection: retrykit's retrygrpc, go-grpc-middleware v2's
// interceptors/retry, and the bare call (lib=grpc, the baseline).

const benchMethod = "/bench.Echo/Unary"

// echoService answers every call with its request, except that when
// failEvery is n > 1 it answers UNAVAILABLE to all but every n-th call.
type echoService struct {
	failEvery int64
	n         atomic.Int64
}

var benchDesc = grpc.ServiceDesc{
	ServiceName: "bench.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Unary",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			s := srv.(*echoService)
			if s.failEvery > 1 && s.n.Add(1)%s.failEvery != 0 {
				return nil, status.Error(codes.Unavailable, "scripted")
			}
			return in, nil
		},
	}},
}

// grpcConn serves s on loopback and returns a connection made with opts.
func grpcConn(b *testing.B, s *echoService, opts ...grpc.DialOption) *grpc.ClientConn {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer()
	srv.RegisterService(&benchDesc, s)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(lis) }()
	cc, err := grpc.NewClient(lis.Addr().String(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close(); srv.Stop(); <-done })
	return cc
}

// grpcLibs are the setups compared, each with at most 4 attempts and no
// waits (the schedule is not what is measured).
func grpcLibs() []struct {
	name string
	opts []grpc.DialOption
} {
	noWait := grpcretry.WithBackoff(func(context.Context, uint) time.Duration { return 0 })
	return []struct {
		name string
		opts []grpc.DialOption
	}{
		{"grpc", nil},
		{"retrykit", must(retrygrpc.DialOptions(retry.Policy{Initial: retry.Immediate, MaxAttempts: 4}))},
		{"middleware", []grpc.DialOption{grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(grpcretry.WithMax(4), noWait))}},
	}
}

func benchUnary(b *testing.B, failEvery int64) {
	for _, lib := range grpcLibs() {
		if failEvery > 1 && lib.name == "grpc" {
			continue // the bare call does not retry
		}
		b.Run("lib="+lib.name, func(b *testing.B) {
			s := &echoService{failEvery: failEvery}
			cc := grpcConn(b, s, lib.opts...)
			ctx := context.Background()
			in, out := wrapperspb.String("hello"), new(wrapperspb.StringValue)
			b.ReportAllocs()
			for b.Loop() {
				if err := cc.Invoke(ctx, benchMethod, in, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGRPCUnary: a successful unary call over loopback.
func BenchmarkGRPCUnary(b *testing.B) { benchUnary(b, 1) }

// BenchmarkGRPCUnaryRetry2: UNAVAILABLE twice, then success: three calls
// on the wire per operation, no waits.
func BenchmarkGRPCUnaryRetry2(b *testing.B) { benchUnary(b, 3) }

// BenchmarkGRPCInterceptor: the interceptor alone, around an invoker that
// succeeds in memory (no network), so that the few hundred nanoseconds an
// interceptor costs are not lost in the noise of a loopback call. lib=grpc
// calls the invoker directly. What grpc-go itself does with the extra call
// option (retrygrpc asks for the trailer) is not included here: see
// BenchmarkGRPCUnary for whole calls.
func BenchmarkGRPCInterceptor(b *testing.B) { benchInterceptor(b, 1) }

// BenchmarkGRPCInterceptorRetry2: as BenchmarkGRPCInterceptor, with an
// invoker that fails UNAVAILABLE twice, then succeeds: the retry path of
// each interceptor (zero waits), without the network. lib=grpc does not
// retry and is left out.
func BenchmarkGRPCInterceptorRetry2(b *testing.B) { benchInterceptor(b, 3) }

// benchInterceptor runs each interceptor around an in-memory invoker whose
// every failEvery-th call succeeds and others fail UNAVAILABLE.
func benchInterceptor(b *testing.B, failEvery int) {
	unavailable := status.Error(codes.Unavailable, "scripted")
	noWait := grpcretry.WithBackoff(func(context.Context, uint) time.Duration { return 0 })
	for _, lib := range []struct {
		name string
		ic   grpc.UnaryClientInterceptor
	}{
		{"grpc", func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(ctx, method, req, reply, cc, opts...)
		}},
		{"retrykit", must(retrygrpc.UnaryClientInterceptor(retry.Policy{Initial: retry.Immediate, MaxAttempts: 4}))},
		{"middleware", grpcretry.UnaryClientInterceptor(grpcretry.WithMax(4), noWait)},
	} {
		if failEvery > 1 && lib.name == "grpc" {
			continue
		}
		b.Run("lib="+lib.name, func(b *testing.B) {
			n := 0
			invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
				if n++; n%failEvery != 0 {
					return unavailable
				}
				return nil
			}
			ctx := context.Background()
			in, out := wrapperspb.String("hello"), new(wrapperspb.StringValue)
			b.ReportAllocs()
			for b.Loop() {
				if err := lib.ic(ctx, benchMethod, in, out, nil, invoker); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// must returns v, and panics with err: the setups compared are valid.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
