package retrygrpc_test

import (
	"context"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/policytable"
	"github.com/retrykit/retry/retrygrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestPolicyTable: the interceptors refuse exactly the Policy fields that
// the table in docs/engine.md says they refuse, naming them: the unary
// interceptor none, the stream interceptor AttemptTimeout, when a stream
// is opened.
func TestPolicyTable(t *testing.T) {
	ctx := context.Background()
	unary := func(p retry.Policy) error {
		return retrygrpc.UnaryClientInterceptor(p)(ctx, "/s/M", nil, nil, nil,
			func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil })
	}
	for _, err := range policytable.Check("../docs/engine.md", "retrygrpc unary", "retrygrpc", unary) {
		t.Error(err)
	}
	stream := func(p retry.Policy) error {
		_, err := retrygrpc.StreamClientInterceptor(p)(ctx, &grpc.StreamDesc{}, nil, "/s/M",
			func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
				return nil, retry.Permanent(status.Error(codes.InvalidArgument, "not retried")) // whatever Retryable says
			})
		return err
	}
	for _, err := range policytable.Check("../docs/engine.md", "retrygrpc streams", "retrygrpc", stream) {
		t.Error(err)
	}
}
