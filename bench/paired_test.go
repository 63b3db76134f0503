package bench

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/retrykit/retry/internal/paired"
)

// The Paired benchmarks compare retrykit with one other library at a time
// on a whole call over loopback, where the difference between libraries
// (tens of nanoseconds) is far below the machine's drift (tens of
// percent): with internal/paired, each of b.N rounds runs a block of calls
// through the other library, two through retrykit, and one through the
// other again (ABBA), and the result is the median ratio retrykit / other
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
		if lib.name == "retrykit" {
			continue
		}
		b.Run("vs="+lib.name, func(b *testing.B) {
			paired.Measure(max(b.N, 10), 50, get(lib.c), get(ours)).Report(b)
		})
	}
}

// BenchmarkPairedGRPCUnary: BenchmarkGRPCUnary's call, retrykit against
// the middleware's interceptor and the bare call (vs=grpc, a baseline).
func BenchmarkPairedGRPCUnary(b *testing.B) {
	ctx := context.Background()
	in := wrapperspb.String("hello")
	call := func(invoke func(ctx context.Context, method string, args, reply any) error) func() {
		return func() {
			out := new(wrapperspb.StringValue)
			if err := invoke(ctx, benchMethod, in, out); err != nil {
				b.Fatal(err)
			}
		}
	}
	s := &echoService{failEvery: 1}
	libs := grpcLibs()
	var ours func()
	for _, lib := range libs {
		if lib.name == "retrykit" {
			cc := grpcConn(b, s, lib.opts...)
			ours = call(func(ctx context.Context, m string, a, r any) error { return cc.Invoke(ctx, m, a, r) })
		}
	}
	for _, lib := range libs {
		if lib.name == "retrykit" {
			continue
		}
		b.Run("vs="+lib.name, func(b *testing.B) {
			cc := grpcConn(b, s, lib.opts...)
			other := call(func(ctx context.Context, m string, a, r any) error { return cc.Invoke(ctx, m, a, r) })
			paired.Measure(max(b.N, 10), 100, other, ours).Report(b)
		})
	}
}
