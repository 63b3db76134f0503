package retrygrpc_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// DialOptions makes the interceptors the connection's one retry layer.
// Here the server answers UNAVAILABLE twice; the third attempt succeeds.
func ExampleDialOptions() {
	s := &echoServer{unary: failFirst(2, status.Error(codes.Unavailable, "warming up"))}
	addr, stop := listen(s)
	defer stop()

	p := retry.Policy{Initial: 10 * time.Millisecond, MaxAttempts: 4}
	dopts, err := retrygrpc.DialOptions(p)
	if err != nil {
		log.Fatal(err) // an invalid p, or a field the interceptors cannot honour
	}
	cc, err := grpc.NewClient(addr, append(dopts,
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()

	out, err := callUnary(context.Background(), cc, methodUnary)
	fmt.Println(out, err, "attempts seen by the server:", s.Calls(methodUnary))
	// Output: hello <nil> attempts seen by the server: 3
}

// WithCodes and WithMethods together: INTERNAL is retried too, but only
// on a method known to be safe to repeat.
func ExampleWithMethods() {
	s := &echoServer{unary: failFirst(1, status.Error(codes.Internal, "oops"))}
	addr, stop := listen(s)
	defer stop()

	ic, err := retrygrpc.UnaryClientInterceptor(
		retry.Policy{Initial: 10 * time.Millisecond},
		retrygrpc.WithCodes(codes.Unavailable, codes.ResourceExhausted, codes.Internal, codes.Unknown),
		retrygrpc.WithMethods("/retrygrpc.test.Echo/Unary"), // idempotent
	)
	if err != nil {
		log.Fatal(err)
	}
	cc, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(ic),
		grpc.WithDisableRetry())
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()

	_, err = callUnary(context.Background(), cc, methodUnary)
	fmt.Println("Unary:", status.Code(err), s.Calls(methodUnary), "attempts")
	_, err = callUnary(context.Background(), cc, methodOther)
	fmt.Println("Other:", status.Code(err), s.Calls(methodOther), "attempt")
	// Output:
	// Unary: OK 2 attempts
	// Other: Internal 1 attempt
}

func ExampleParsePushback() {
	for _, v := range []string{"200", "0", "-1", "soon"} {
		d, ok := retrygrpc.ParsePushback(v)
		fmt.Println(v, d, ok)
	}
	// Output:
	// 200 200ms true
	// 0 0s true
	// -1 0s false
	// soon 0s false
}
