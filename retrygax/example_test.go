package retrygax_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	redis "cloud.google.com/go/redis/apiv1"
	"cloud.google.com/go/redis/apiv1/redispb"
	"github.com/googleapis/gax-go/v2"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygax"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Replace a generated client's retry settings for one method, so that
// retrykit is its one retry layer. The loopback fake of the Memorystore
// for Redis API answers UNAVAILABLE twice, then the instance.
func ExampleWithPolicy() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fake := &fakeRedis{script: failing(2, status.Error(codes.Unavailable, "restarting"))}
	srv := grpc.NewServer()
	redispb.RegisterCloudRedisServer(srv, fake)
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	ctx := context.Background()
	c, err := redis.NewCloudRedisClient(ctx, option.WithGRPCConn(conn))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	opt, err := retrygax.WithPolicy(retry.Policy{Initial: 10 * time.Millisecond, MaxAttempts: 4})
	if err != nil {
		log.Fatal(err)
	}
	c.CallOptions.GetInstance = []gax.CallOption{gax.WithTimeout(time.Minute), opt}

	inst, err := c.GetInstance(ctx, &redispb.GetInstanceRequest{Name: instanceName})
	fmt.Println(inst.GetState(), err, "calls:", fake.calls.Load())
	// Output: READY <nil> calls: 3
}
