package retrygax_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	redis "cloud.google.com/go/redis/apiv1"
	"cloud.google.com/go/redis/apiv1/redispb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

type headerFake struct {
	redispb.UnimplementedCloudRedisServer
	calls atomic.Int32
}

func (f *headerFake) GetInstance(ctx context.Context, req *redispb.GetInstanceRequest) (*redispb.Instance, error) {
	f.calls.Add(1)
	grpc.SendHeader(ctx, metadata.Pairs("x-served", "1"))
	return nil, status.Error(codes.Unavailable, "after headers")
}

// A server that sent response headers and then failed with a retried
// code answered from its application: the call is committed, made once.
func TestGRPCCommittedAfterHeaders(t *testing.T) {
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := grpc.NewServer()
	f := &headerFake{}
	redispb.RegisterCloudRedisServer(srv, f)
	go srv.Serve(lis)
	defer srv.Stop()
	conn, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	c, _ := redis.NewCloudRedisClient(context.Background(), option.WithGRPCConn(conn))
	defer c.Close()
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(fast)}
	_, err := getInstance(t.Context(), c)
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("server saw %d calls after sending headers, want 1 (err %v)", n, err)
	}
}
