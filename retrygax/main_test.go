package retrygax_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	redis "cloud.google.com/go/redis/apiv1"
	"cloud.google.com/go/redis/apiv1/redispb"
	"github.com/googleapis/gax-go/v2"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygax"
	"github.com/retrykit/retry/retrygrpc"
	"go.uber.org/goleak"
	"google.golang.org/api/option"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const instanceName = "projects/p/locations/us-central1/instances/cache"

// fakeRedis is a loopback CloudRedis gRPC server whose GetInstance answers
// attempt n with script(n) (nil: the instance).
type fakeRedis struct {
	redispb.UnimplementedCloudRedisServer
	script func(n int) error
	// trailer, when set, is sent with every error that script returns.
	trailer metadata.MD
	calls   atomic.Int32
}

func (f *fakeRedis) GetInstance(ctx context.Context, req *redispb.GetInstanceRequest) (*redispb.Instance, error) {
	n := int(f.calls.Add(1))
	if f.script != nil {
		if err := f.script(n); err != nil {
			if f.trailer != nil {
				grpc.SetTrailer(ctx, f.trailer)
			}
			return nil, err
		}
	}
	return &redispb.Instance{Name: req.GetName(), State: redispb.Instance_READY}, nil
}

// grpcClient starts f on loopback and returns the generated client over a
// connection made with dopts (plus insecure credentials).
func grpcClient(t *testing.T, f *fakeRedis, dopts ...grpc.DialOption) *redis.CloudRedisClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	redispb.RegisterCloudRedisServer(srv, f)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dopts...)...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := redis.NewCloudRedisClient(context.Background(), option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		conn.Close()
		srv.Stop()
		<-done
	})
	return c
}

// restAnswer is one scripted REST answer: a status and headers, or the
// instance when code is 200.
type restAnswer struct {
	code    int
	headers map[string]string
	details []any // the error's details, as the JSON error body carries them
}

// restClient starts an httptest fake of the CloudRedis REST API answering
// attempt n with script(n) and returns the generated REST client over hc.
func restClient(t *testing.T, calls *atomic.Int32, script func(n int) restAnswer, hc *http.Client) *redis.CloudRedisClient {
	t.Helper()
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := script(int(calls.Add(1)))
		for k, v := range a.headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		if a.code != http.StatusOK {
			w.WriteHeader(a.code)
			e := map[string]any{"code": a.code, "message": "scripted " + strconv.Itoa(a.code), "status": "UNAVAILABLE"}
			if a.details != nil {
				e["details"] = a.details
			}
			json.NewEncoder(w).Encode(map[string]any{"error": e})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"name": r.URL.Path[len("/v1/"):], "state": "READY"})
	}))
	if hc == nil {
		hc = &http.Client{}
	}
	c, err := redis.NewCloudRedisRESTClient(context.Background(),
		option.WithEndpoint(fake.URL), option.WithHTTPClient(hc), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		fake.Close()
		hc.CloseIdleConnections()
	})
	return c
}

func getInstance(ctx context.Context, c *redis.CloudRedisClient) (*redispb.Instance, error) {
	return c.GetInstance(ctx, &redispb.GetInstanceRequest{Name: instanceName})
}

func retryInfoErr(c codes.Code, d time.Duration) error {
	st, err := status.New(c, "slow down").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

// failing returns a script that answers the first k attempts with err.
func failing(k int, err error) func(int) error {
	return func(n int) error {
		if n <= k {
			return err
		}
		return nil
	}
}

// mustPolicy is WithPolicy for a policy the test knows it accepts.
// mustDial is retrygrpc.DialOptions, which panics if p is refused.
func mustDial(p retry.Policy) []grpc.DialOption {
	dopts, err := retrygrpc.DialOptions(p)
	if err != nil {
		panic(err)
	}
	return dopts
}

func mustPolicy(p retry.Policy, opts ...retrygax.Option) gax.CallOption {
	o, err := retrygax.WithPolicy(p, opts...)
	if err != nil {
		panic(err)
	}
	return o
}
