package retrygrpctest_test

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygrpc"
	"github.com/retrykit/retry/retrygrpc/retrygrpctest"
	"github.com/retrykit/retry/retrytest"
)

// A scripted server in front of a real service, over bufconn: the first
// attempt is refused with UNAVAILABLE and a pushback of 1 ms, the second
// gets a RESOURCE_EXHAUSTED with a RetryInfo, the third reaches the
// service. In a test, run it inside synctest.Test and the waits take no
// time.
func ExampleServer() {
	s := retrygrpctest.NewServer(
		retrygrpctest.Reply{Code: codes.Unavailable, Pushback: "1"},
		retrygrpctest.Reply{Code: codes.ResourceExhausted, RetryDelay: 1},
		retrygrpctest.Reply{},
	)
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.UnaryInterceptor(s.UnaryInterceptor))
	c := &counter{}
	srv.RegisterService(c.desc(), c)
	go srv.Serve(s.Listener(lis))
	defer srv.Stop()

	var rec retrytest.Recorder
	policy := retrytest.NoWaits(retry.Policy{Observer: &rec})
	dopts, err := retrygrpc.DialOptions(policy)
	if err != nil {
		fmt.Println(err)
		return
	}
	cc, err := grpc.NewClient("passthrough:///bufconn", append(dopts,
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cc.Close()
	out := new(wrapperspb.Int64Value)
	err = cc.Invoke(context.Background(), "/retrygrpctest.test.Counter/Add", wrapperspb.String("x"), out)
	fmt.Println(out.GetValue(), err)
	fmt.Println(rec.Attempts(), "attempts")
	fmt.Printf("%+v\n", s.Count("/retrygrpctest.test.Counter/Add"))
	// Output:
	// 1 <nil>
	// 3 attempts
	// {Requests:3 Applied:1}
}
