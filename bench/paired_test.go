package bench

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/retrykit/retry/internal/paired"
)

// The Paired benchmarks compare retrykit with one other library at a time
// on a whole call over loopback, where the difference between libraries
// (tens of nanoseconds) is far below the machine's drift (tens of
// percent): with internal/paired, each of b.N rounds runs blocks of calls
// through the other library (A) and through retrykit (B) in the pattern
// ABBA BAAB, and the result is the median ratio retrykit / other
// with its 95 % interval (overhead-% is that ratio minus 1, in percent;
// negative means retrykit is faster):
//
//	cd bench && go test -run '^$' -bench Paired -benchtime 400x -v .

// BenchmarkPairedHTTPGet: BenchmarkHTTPGet's call, retrykit against each
// other client (vs=nethttp is the plain client, a baseline).
func BenchmarkPairedHTTPGet(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 1024)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(payload)
	}))
	defer srv.Close()
	clients := httpClients(b)
	get := func(c *http.Client) func() { return func() { getPayload(b, c, srv.URL, payload) } }
	var ours *http.Client
	for _, lib := range clients {
		if lib.name == "retrykit" {
			ours = lib.c
		}
	}
	for _, lib := range clients {
		name := lib.name
		if name == "retrykit" {
			// The control: retrykit against a second retrykit client, which
			// shows the method's own error (the ratio should be 1).
			name = "retrykit-again"
			for _, again := range httpClients(b) {
				if again.name == "retrykit" {
					lib.c = again.c
				}
			}
		}
		b.Run("vs="+name, func(b *testing.B) {
			paired.Measure(max(b.N, 10), 50, get(lib.c), get(ours)).Report(b)
		})
	}
}

// BenchmarkPairedGRPCUnary: BenchmarkGRPCUnary's call, retrykit against
// the middleware's interceptor and the bare call (vs=grpc, a baseline).
func BenchmarkPairedGRPCUnary(b *testing.B) { pairedGRPC(b, 1) }

// BenchmarkPairedGRPCUnaryRetry2: BenchmarkGRPCUnaryRetry2's call
// (UNAVAILABLE twice, then success), retrykit against the middleware.
func BenchmarkPairedGRPCUnaryRetry2(b *testing.B) { pairedGRPC(b, 3) }

// pairedGRPC compares retrykit's unary call with each other setup of
// grpcLibs, each library with its own server, whose every failEvery-th
// call succeeds.
func pairedGRPC(b *testing.B, failEvery int64) {
	ctx := context.Background()
	in := wrapperspb.String("hello")
	call := func(name string) func() {
		var opts []grpc.DialOption
		for _, lib := range grpcLibs() {
			if lib.name == name {
				opts = lib.opts
			}
		}
		cc := grpcConn(b, &echoService{failEvery: failEvery}, opts...)
		return func() {
			if err := cc.Invoke(ctx, benchMethod, in, new(wrapperspb.StringValue)); err != nil {
				b.Fatal(err)
			}
		}
	}
	ours := call("retrykit")
	for _, lib := range grpcLibs() {
		if failEvery > 1 && lib.name == "grpc" {
			continue // the bare call does not retry
		}
		name := lib.name
		if name == "retrykit" {
			// The control: retrykit against a second retrykit connection,
			// which shows the method's own error (the ratio should be 1).
			name = "retrykit-again"
		}
		b.Run("vs="+name, func(b *testing.B) {
			paired.Measure(max(b.N, 10), 100, call(lib.name), ours).Report(b)
		})
	}
}

// BenchmarkPairedGRPCCallOptions: what grpc-go itself charges for the two
// call options through which retrygrpc reads each attempt's response
// headers (gRFC A6's commit rule) and trailer (grpc-retry-pushback-ms), on
// bare calls without any interceptor: one op is three calls against a
// server that answers UNAVAILABLE, UNAVAILABLE, OK (the wire traffic of
// BenchmarkPairedGRPCUnaryRetry2), made with grpc.Header and grpc.Trailer
// (B) against without them (A), each on its own connection.
func BenchmarkPairedGRPCCallOptions(b *testing.B) {
	ctx := context.Background()
	in := wrapperspb.String("hello")
	calls := func(withOptions bool) func() {
		cc := grpcConn(b, &echoService{failEvery: 3})
		return func() {
			for range 3 {
				if withOptions {
					var header, trailer metadata.MD
					cc.Invoke(ctx, benchMethod, in, new(wrapperspb.StringValue), grpc.Header(&header), grpc.Trailer(&trailer))
				} else {
					cc.Invoke(ctx, benchMethod, in, new(wrapperspb.StringValue))
				}
			}
		}
	}
	without, with := calls(false), calls(true)
	b.Run("vs=no-options", func(b *testing.B) {
		paired.Measure(max(b.N, 10), 100, without, with).Report(b)
	})
	b.Run("vs=no-options-again", func(b *testing.B) {
		paired.Measure(max(b.N, 10), 100, without, calls(false)).Report(b)
	})
}
