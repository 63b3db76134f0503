package retrygrpc_test

import (
	"context"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// BenchmarkUnary compares a successful unary call over loopback without
// and with the interceptor (DialOptions with the zero Policy).
func BenchmarkUnary(b *testing.B) {
	s := &echoServer{}
	var md metadata.MD
	for _, bc := range []struct {
		name  string
		dopts []grpc.DialOption
		copts []grpc.CallOption
	}{
		{"bare", nil, nil},
		{"bare-trailer", nil, []grpc.CallOption{grpc.Trailer(&md)}},
		{"retrygrpc", retrygrpc.DialOptions(retry.Policy{}), nil},
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
