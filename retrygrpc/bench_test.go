package retrygrpc_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/paired"
	"github.com/retrykit/retry/retrygrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// BenchmarkUnary compares a successful unary call over loopback without
// and with the interceptor (DialOptions with the zero Policy), and with a
// bare call that asks for the headers and the trailer as the interceptor
// does.
func BenchmarkUnary(b *testing.B) {
	s := &echoServer{}
	var hd, md metadata.MD
	for _, bc := range []struct {
		name  string
		dopts []grpc.DialOption
		copts []grpc.CallOption
	}{
		{"bare", nil, nil},
		{"bare-trailer", nil, []grpc.CallOption{grpc.Trailer(&md)}},
		{"bare-header-trailer", nil, []grpc.CallOption{grpc.Header(&hd), grpc.Trailer(&md)}},
		{"retrygrpc", dialOptions(b, retry.Policy{}), nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cc := serve(b, s, bc.dopts...)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := callUnary(ctx, cc, methodUnary, bc.copts...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUnaryPaired measures what the interceptor (DialOptions with the
// zero Policy) adds to a successful unary call over loopback, as a share
// of the call, with internal/paired: each of b.N rounds runs blocks of 100
// calls on a bare connection and on one with the interceptor, interleaved
// (ABBA BAAB), so that the machine's drift, far larger than the difference
// here, hits both alike:
//
//	cd retrygrpc && go test -run '^$' -bench UnaryPaired -benchtime 400x -v .
func BenchmarkUnaryPaired(b *testing.B) {
	s := &echoServer{}
	bare := serve(b, s)
	intercepted := serve(b, s, dialOptions(b, retry.Policy{})...)
	ctx := context.Background()
	call := func(cc *grpc.ClientConn) func() {
		return func() {
			if _, err := callUnary(ctx, cc, methodUnary); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("vs=bare", func(b *testing.B) { paired.Measure(max(b.N, 10), 100, call(bare), call(intercepted)).Report(b) })
	// The control: a second bare connection against the first, which shows
	// the method's own error (the ratio should be 1).
	again := serve(b, s)
	b.Run("vs=bare-again", func(b *testing.B) { paired.Measure(max(b.N, 10), 100, call(bare), call(again)).Report(b) })
}

// BenchmarkPerCallState is the reference for the in-memory interceptor
// benchmark of ../bench: what holding per-call state that grpc-go may
// write to (the headers and trailer of grpc.Header and grpc.Trailer) costs
// without allocating, by the two ways to own a reusable object across
// goroutines: a sync.Pool Get and Put (what the interceptor does), and
// an atomic compare-and-swap to take a slot and a store to give it back.
//
//	cd retrygrpc && go test -run '^$' -bench PerCallState .
func BenchmarkPerCallState(b *testing.B) {
	type state struct {
		header, trailer metadata.MD
		busy            atomic.Bool
	}
	b.Run("way=sync.Pool", func(b *testing.B) {
		pool := sync.Pool{New: func() any { return new(state) }}
		b.ReportAllocs()
		for b.Loop() {
			s := pool.Get().(*state)
			s.header, s.trailer = nil, nil
			pool.Put(s)
		}
	})
	b.Run("way=atomic", func(b *testing.B) {
		var slot state
		b.ReportAllocs()
		for b.Loop() {
			if slot.busy.CompareAndSwap(false, true) {
				slot.header, slot.trailer = nil, nil
				slot.busy.Store(false)
			}
		}
	})
}

// BenchmarkUnaryInterceptor: the unary interceptor alone (the zero Policy,
// as DialOptions(retry.Policy{}) installs it), around an invoker that
// answers in memory, so that the nanoseconds the interceptor itself costs
// are not lost in the noise of a loopback call. md says what outgoing
// metadata the caller's context carries: none, another key, or a
// grpc-previous-rpc-attempts that a proxy forwarded (which the
// interceptor must drop from its attempts). retry=2 fails twice with
// UNAVAILABLE before the success (zero waits).
//
//	cd retrygrpc && go test -run '^$' -bench UnaryInterceptor -benchmem .
func BenchmarkUnaryInterceptor(b *testing.B) {
	unavailable := status.Error(codes.Unavailable, "scripted")
	bg := context.Background()
	for _, md := range []struct {
		name string
		ctx  context.Context
	}{
		{"none", bg},
		{"other", metadata.AppendToOutgoingContext(bg, "x-request-id", "42")},
		{"previous", metadata.AppendToOutgoingContext(bg, retrygrpc.HeaderPreviousAttempts, "3")},
	} {
		for _, failures := range []int{0, 2} {
			b.Run("md="+md.name+"/retry="+strconv.Itoa(failures), func(b *testing.B) {
				ic := unaryInterceptor(b, retry.Policy{Initial: retry.Immediate, MaxAttempts: 4})
				n := 0
				invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
					if n++; n%(failures+1) != 0 {
						return unavailable
					}
					return nil
				}
				in, out := wrapperspb.String("hello"), new(wrapperspb.StringValue)
				b.ReportAllocs()
				for b.Loop() {
					if err := ic(md.ctx, methodUnary, in, out, nil, invoker); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
