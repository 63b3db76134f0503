// Command memorystore shows retrykit as the one retry layer of the
// generated Memorystore for Redis client (cloud.google.com/go/redis/apiv1),
// over gRPC and over REST, against loopback fakes of the CloudRedis API.
//
// The gRPC fake answers GetInstance with UNAVAILABLE, then
// RESOURCE_EXHAUSTED carrying google.rpc.RetryInfo 200 ms, then the
// instance. The REST fake answers 429 with Retry-After: 1, then 503, then
// 200. Each is called with the client's defaults (which retry nothing),
// with retrygax.WithPolicy, and with retrygax above a transport that
// retries too (retrygrpc.DialOptions, retryhttp.Transport); a last row per
// transport has a backend that always fails, to show that the two layers
// do not multiply. It prints a Markdown table of what each server counted
// and exits with status 1 if a stacked setup ever made more than one
// layer's worth of calls.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"time"

	redis "cloud.google.com/go/redis/apiv1"
	"cloud.google.com/go/redis/apiv1/redispb"
	"github.com/googleapis/gax-go/v2"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygax"
	"github.com/retrykit/retry/retrygrpc"
	"github.com/retrykit/retry/retryhttp"
	"google.golang.org/api/option"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

const name = "projects/demo/locations/us-central1/instances/cache"

// policy is the one retry layer: the guide's exponential backoff with
// additive jitter, scaled down to 100 ms (and jitter up to 100 ms) so the
// demo is quick, at most 4 attempts.
var policy = retry.Policy{Initial: 100 * time.Millisecond, Jitter: retry.AdditiveJitter(100 * time.Millisecond),
	MaxDelay: 2 * time.Second, MaxAttempts: 4}

// stacked is what each layer of a stacked setup uses: alone, 3 attempts.
var stacked = retry.Policy{Initial: 10 * time.Millisecond, Jitter: retry.AdditiveJitter(10 * time.Millisecond), MaxAttempts: 3}

type row struct {
	transport, setup, backend string
	calls                     int32
	result                    string
	took                      time.Duration
	maxCalls                  int32 // one layer's worth; 0: not checked
}

func main() {
	log.SetFlags(0)
	var rows []row
	rows = append(rows, grpcRows()...)
	rows = append(rows, restRows()...)

	fmt.Println("| transport | setup | backend | calls the server counted | result | time |")
	fmt.Println("|---|---|---|---|---|---|")
	bad := false
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s | %d | %s | %s |\n", r.transport, r.setup, r.backend, r.calls, r.result, r.took.Round(100*time.Millisecond))
		if r.maxCalls > 0 && r.calls > r.maxCalls {
			log.Printf("%s, %s: %d calls, more than one layer's %d", r.transport, r.setup, r.calls, r.maxCalls)
			bad = true
		}
	}
	if bad {
		os.Exit(1)
	}
}

// fakeRedis is a CloudRedis gRPC server whose GetInstance answers call n
// with script(n).
type fakeRedis struct {
	redispb.UnimplementedCloudRedisServer
	script func(n int32) error
	calls  atomic.Int32
}

func (f *fakeRedis) GetInstance(_ context.Context, req *redispb.GetInstanceRequest) (*redispb.Instance, error) {
	if err := f.script(f.calls.Add(1)); err != nil {
		return nil, err
	}
	return &redispb.Instance{Name: req.GetName(), State: redispb.Instance_READY}, nil
}

func grpcScript(n int32) error {
	switch n {
	case 1:
		return status.Error(codes.Unavailable, "instance is restarting")
	case 2:
		st, _ := status.New(codes.ResourceExhausted, "quota").WithDetails(
			&errdetails.RetryInfo{RetryDelay: durationpb.New(200 * time.Millisecond)})
		return st.Err()
	}
	return nil
}

func grpcRows() []row {
	const backend = "UNAVAILABLE, RESOURCE_EXHAUSTED + RetryInfo 200 ms, OK"
	down := func(int32) error { return status.Error(codes.Unavailable, "down") }
	return []row{
		runGRPC("client defaults", backend, grpcScript, nil, nil, 0),
		runGRPC("retrygax.WithPolicy", backend, grpcScript, nil, []gax.CallOption{gaxPolicy(policy)}, 0),
		runGRPC("retrygax over retrygrpc.DialOptions", backend, grpcScript, grpcDial(policy), []gax.CallOption{gaxPolicy(policy)}, 4),
		runGRPC("retrygax over retrygrpc.DialOptions, 3 attempts each", "always UNAVAILABLE", down, grpcDial(stacked), []gax.CallOption{gaxPolicy(stacked)}, 3),
	}
}

func runGRPC(setup, backend string, script func(int32) error, dopts []grpc.DialOption, copts []gax.CallOption, maxCalls int32) row {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	f := &fakeRedis{script: script}
	srv := grpc.NewServer()
	redispb.RegisterCloudRedisServer(srv, f)
	go srv.Serve(lis)
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dopts...)...)
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
	if copts != nil {
		// Replace the method's defaults (a 600 s timeout, no retry): the
		// policy is the one retry layer.
		c.CallOptions.GetInstance = copts
	}
	return get(ctx, c, "gRPC", setup, backend, &f.calls, maxCalls)
}

func restRows() []row {
	const backend = "429 + Retry-After: 1, 503, 200"
	script := func(n int32) (int, string) {
		switch n {
		case 1:
			return http.StatusTooManyRequests, "1"
		case 2:
			return http.StatusServiceUnavailable, ""
		}
		return http.StatusOK, ""
	}
	down := func(int32) (int, string) { return http.StatusServiceUnavailable, "" }
	return []row{
		runREST("client defaults", backend, script, nil, nil, 0),
		runREST("retrygax.WithPolicy", backend, script, nil, []gax.CallOption{gaxPolicy(policy)}, 0),
		runREST("retrygax over retryhttp.Transport", backend, script, &retryhttp.Transport{Policy: policy}, []gax.CallOption{gaxPolicy(policy)}, 4),
		runREST("retrygax over retryhttp.Transport, 3 attempts each", "always 503", down, &retryhttp.Transport{Policy: stacked}, []gax.CallOption{gaxPolicy(stacked)}, 3),
	}
}

func runREST(setup, backend string, script func(int32) (int, string), rt http.RoundTripper, copts []gax.CallOption, maxCalls int32) row {
	var calls atomic.Int32
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, retryAfter := script(calls.Add(1))
		w.Header().Set("Content-Type", "application/json")
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		if code != http.StatusOK {
			w.WriteHeader(code)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": http.StatusText(code)}})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"name": strings.TrimPrefix(r.URL.Path, "/v1/"), "state": "READY"})
	}))
	defer fake.Close()
	hc := &http.Client{Transport: rt}
	defer hc.CloseIdleConnections()
	ctx := context.Background()
	c, err := redis.NewCloudRedisRESTClient(ctx, option.WithEndpoint(fake.URL), option.WithHTTPClient(hc), option.WithoutAuthentication())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if copts != nil {
		c.CallOptions.GetInstance = copts
	}
	return get(ctx, c, "REST", setup, backend, &calls, maxCalls)
}

func get(ctx context.Context, c *redis.CloudRedisClient, transport, setup, backend string, calls *atomic.Int32, maxCalls int32) row {
	start := time.Now()
	inst, err := c.GetInstance(ctx, &redispb.GetInstanceRequest{Name: name})
	r := row{transport: transport, setup: setup, backend: backend, took: time.Since(start), maxCalls: maxCalls}
	r.calls = calls.Load()
	if err != nil {
		r.result = "error " + status.Code(err).String()
	} else {
		r.result = "instance " + inst.GetState().String()
	}
	return r
}

// gaxPolicy is retrygax.WithPolicy for the example's policies, which it
// accepts; an error ends the example.
func grpcDial(p retry.Policy) []grpc.DialOption {
	dopts, err := retrygrpc.DialOptions(p)
	if err != nil {
		log.Fatal(err)
	}
	return dopts
}

func gaxPolicy(p retry.Policy) gax.CallOption {
	o, err := retrygax.WithPolicy(p)
	if err != nil {
		log.Fatal(err)
	}
	return o
}
