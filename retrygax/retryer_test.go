package retrygax_test

import (
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/googleapis/gax-go/v2"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/retrygax"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retrytest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

var fast = retry.Policy{Initial: time.Millisecond, MaxDelay: 5 * time.Millisecond, MaxAttempts: 4}

func TestGRPCDefaultsDoNotRetry(t *testing.T) {
	f := &fakeRedis{script: failing(1, status.Error(codes.Unavailable, "down"))}
	c := grpcClient(t, f)
	if _, err := getInstance(t.Context(), c); status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v, want Unavailable", err)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("server saw %d calls, want 1 (cloud.google.com/go/redis retries nothing)", n)
	}
}

func TestGRPCWithPolicy(t *testing.T) {
	f := &fakeRedis{script: func(n int) error {
		switch n {
		case 1:
			return status.Error(codes.Unavailable, "down")
		case 2:
			return retryInfoErr(codes.ResourceExhausted, 200*time.Millisecond)
		}
		return nil
	}}
	c := grpcClient(t, f)
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(fast)}
	start := time.Now()
	inst, err := getInstance(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 200*time.Millisecond || took > 2*time.Second { // not the policy's own, longer waits
		t.Fatalf("took %v, want about 200 ms (RetryInfo)", took)
	}
	if n := f.calls.Load(); n != 3 || inst.GetName() != instanceName {
		t.Fatalf("server saw %d calls (want 3), got %v", n, inst)
	}
}

func TestGRPCCodes(t *testing.T) {
	for _, tc := range []struct {
		code  codes.Code
		calls int32
	}{
		{codes.Unavailable, 2},
		{codes.ResourceExhausted, 2},
		{codes.Internal, 1},
		{codes.Unknown, 1},
		{codes.InvalidArgument, 1},
		{codes.NotFound, 1},
		{codes.DeadlineExceeded, 1},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			f := &fakeRedis{script: failing(1, status.Error(tc.code, "scripted"))}
			c := grpcClient(t, f)
			c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(fast)}
			_, err := getInstance(t.Context(), c)
			if n := f.calls.Load(); n != tc.calls {
				t.Fatalf("server saw %d calls, want %d (err %v)", n, tc.calls, err)
			}
			if (err == nil) != (tc.calls == 2) {
				t.Fatalf("err = %v", err)
			}
		})
	}
	// WithCodes replaces the set.
	f := &fakeRedis{script: failing(1, status.Error(codes.Internal, "scripted"))}
	c := grpcClient(t, f)
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(fast, retrygax.WithCodes(codes.Internal))}
	if _, err := getInstance(t.Context(), c); err != nil || f.calls.Load() != 2 {
		t.Fatalf("WithCodes(Internal): err %v after %d calls, want success after 2", err, f.calls.Load())
	}
}

func TestGRPCMaxAttempts(t *testing.T) {
	f := &fakeRedis{script: failing(100, status.Error(codes.Unavailable, "down"))}
	c := grpcClient(t, f)
	p := fast
	p.MaxAttempts = 3
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p)}
	if _, err := getInstance(t.Context(), c); status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v", err)
	}
	if n := f.calls.Load(); n != 3 {
		t.Fatalf("server saw %d calls, want 3", n)
	}
}

func TestServerDelayBounds(t *testing.T) {
	// RetryInfo beyond WithMaxServerWait: the error comes back at once.
	f := &fakeRedis{script: failing(1, retryInfoErr(codes.Unavailable, time.Second))}
	c := grpcClient(t, f)
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(fast, retrygax.WithMaxServerWait(100*time.Millisecond))}
	start := time.Now()
	if _, err := getInstance(t.Context(), c); status.Code(err) != codes.Unavailable || time.Since(start) > 150*time.Millisecond {
		t.Fatalf("err = %v after %v, want Unavailable at once", err, time.Since(start))
	}
	// RetryInfo beyond MaxElapsed: the same.
	f2 := &fakeRedis{script: failing(1, retryInfoErr(codes.Unavailable, time.Second))}
	c2 := grpcClient(t, f2)
	p := fast
	p.MaxElapsed = 100 * time.Millisecond
	c2.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p)}
	start = time.Now()
	if _, err := getInstance(t.Context(), c2); status.Code(err) != codes.Unavailable || time.Since(start) > 150*time.Millisecond {
		t.Fatalf("err = %v after %v, want Unavailable at once", err, time.Since(start))
	}
	if a, b := f.calls.Load(), f2.calls.Load(); a != 1 || b != 1 {
		t.Fatalf("server saw %d and %d calls, want 1 and 1", a, b)
	}
}

// retrygax above a connection whose interceptor already retries: the
// interceptor's *retry.Error is not retried again.
func TestGRPCStackedOverInterceptor(t *testing.T) {
	f := &fakeRedis{script: failing(100, status.Error(codes.Unavailable, "down"))}
	p := fast
	p.MaxAttempts = 3
	c := grpcClient(t, f, mustDial(p)...)
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p)}
	_, err := getInstance(t.Context(), c)
	if status.Code(err) != codes.Unavailable || !retry.IsExhausted(err) {
		t.Fatalf("err = %v", err)
	}
	if n := f.calls.Load(); n != 3 {
		t.Fatalf("server saw %d calls, want 3 (one layer)", n)
	}
}

func TestGRPCBudget(t *testing.T) {
	b, err := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: 0.1, Window: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRedis{script: failing(100, status.Error(codes.Unavailable, "down"))}
	c := grpcClient(t, f)
	p := fast
	p.MaxAttempts = 5
	p.Budget = b // one retry in reserve
	var rec retrytest.Recorder
	p.Observer = &rec
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p)}
	getInstance(t.Context(), c)
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("server saw %d calls, want 2 (one retry granted)", n)
	}
	if n, reason := rec.Count(retry.EventDone), rec.Reason(); n != 1 || reason != retry.ReasonBudget {
		t.Fatalf("%d EventDone, reason %v; want one, budget", n, reason)
	}
}

func TestObserverEvents(t *testing.T) {
	f := &fakeRedis{script: failing(1, status.Error(codes.Unavailable, "down"))}
	c := grpcClient(t, f)
	var rec retrytest.Recorder
	p := fast
	p.Observer = &rec
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p)}
	if _, err := getInstance(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	want := []string{"attempt/1", "retry/1", "attempt/2", "done/2(ok)"}
	if got := events(&rec); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	all := rec.Events()
	// Waited: none before the first attempt and its retry; the retry's
	// Delay before the second attempt (reported as the retry is granted)
	// and in the whole call.
	if d := all[1].Delay; all[0].Waited != 0 || all[1].Waited != 0 || all[2].Waited != d || all[3].Waited != d {
		t.Fatalf("Waited %v, %v, %v, %v with a Delay of %v: want 0, 0, Delay, Delay",
			all[0].Waited, all[1].Waited, all[2].Waited, all[3].Waited, d)
	}
}

func TestThrottleFedThroughOnFinish(t *testing.T) {
	for _, tc := range []struct {
		err      error
		overload bool
	}{
		{status.Error(codes.Unavailable, "down"), true},
		{status.Error(codes.NotFound, "no"), false},
		{nil, false},
	} {
		th, err := retry.NewThrottle(retry.ThrottleConfig{})
		if err != nil {
			t.Fatal(err)
		}
		f := &fakeRedis{script: failing(1000, tc.err)}
		c := grpcClient(t, f)
		p := fast
		p.MaxAttempts = 1
		p.Throttle = th
		c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p)}
		for range 20 {
			getInstance(t.Context(), c)
		}
		if got := th.Probability() > 0; got != tc.overload {
			t.Fatalf("after 20 calls failing with %v: throttle probability %v", tc.err, th.Probability())
		}
	}
}

func TestRESTWithPolicy(t *testing.T) {
	var calls atomic.Int32
	script := func(n int) restAnswer {
		switch n {
		case 1:
			return restAnswer{code: 429, headers: map[string]string{"Retry-After": "0"}}
		case 2:
			return restAnswer{code: 503}
		}
		return restAnswer{code: 200}
	}
	c := restClient(t, &calls, script, nil)
	if _, err := getInstance(t.Context(), c); status.Code(err) != codes.ResourceExhausted && err == nil {
		t.Fatalf("defaults: err = %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("defaults: server saw %d calls, want 1", n)
	}
	calls.Store(0)
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(fast)}
	if _, err := getInstance(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("server saw %d calls, want 3", n)
	}
}

func TestRESTStatuses(t *testing.T) {
	for _, tc := range []struct {
		code  int
		calls int32
	}{
		{408, 2}, {429, 2}, {500, 2}, {502, 2}, {503, 2}, {504, 2},
		{400, 1}, {403, 1}, {404, 1}, {501, 1}, {505, 1}, {511, 1},
	} {
		t.Run(strconv.Itoa(tc.code), func(t *testing.T) {
			var calls atomic.Int32
			c := restClient(t, &calls, func(n int) restAnswer {
				if n == 1 {
					return restAnswer{code: tc.code}
				}
				return restAnswer{code: 200}
			}, nil)
			c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(fast)}
			getInstance(t.Context(), c)
			if n := calls.Load(); n != tc.calls {
				t.Fatalf("server saw %d calls, want %d", n, tc.calls)
			}
		})
	}
}

// A Retry-After above WithMaxServerWait returns the error at once: the
// header is read.
func TestRESTRetryAfter(t *testing.T) {
	var calls atomic.Int32
	c := restClient(t, &calls, func(n int) restAnswer {
		return restAnswer{code: 503, headers: map[string]string{"Retry-After": "1"}}
	}, nil)
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(fast, retrygax.WithMaxServerWait(500*time.Millisecond))}
	start := time.Now()
	getInstance(t.Context(), c)
	if n, took := calls.Load(), time.Since(start); n != 1 || took > 900*time.Millisecond { // under the 1 s asked: no wait
		t.Fatalf("server saw %d calls in %v, want 1 at once", n, took)
	}
}

// A Retry-After beyond what a Duration holds is more than any cap, even
// WithMaxServerWait(math.MaxInt64): the error comes back at once, never a
// wait that wraps or an instant retry.
func TestRESTRetryAfterOverflow(t *testing.T) {
	for _, ra := range []string{"9223372037", "99999999999999999999"} {
		var calls atomic.Int32
		c := restClient(t, &calls, func(n int) restAnswer {
			return restAnswer{code: 503, headers: map[string]string{"Retry-After": ra}}
		}, nil)
		c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(fast, retrygax.WithMaxServerWait(math.MaxInt64))}
		start := time.Now()
		getInstance(t.Context(), c)
		if n, took := calls.Load(), time.Since(start); n != 1 || took > 900*time.Millisecond { // no wait (any would be far longer)
			t.Fatalf("Retry-After %s: server saw %d calls in %v, want 1 at once", ra, n, took)
		}
	}
}

// retrygax above a retryhttp.Transport that already retries: the
// transport's give-up mark (Retry-Exhausted on the response, kept in
// googleapi.Error.Header) stops the gax layer.
func TestRESTStackedOverTransport(t *testing.T) {
	var calls atomic.Int32
	p := fast
	p.MaxAttempts = 3
	hc := &http.Client{Transport: &retryhttp.Transport{Policy: p}}
	c := restClient(t, &calls, func(int) restAnswer { return restAnswer{code: 503} }, hc)
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p)}
	getInstance(t.Context(), c)
	if n := calls.Load(); n != 3 {
		t.Fatalf("server saw %d calls, want 3 (one layer)", n)
	}
}

// An invalid policy, and a field a Retryer cannot apply, are refused
// where the option is made, with an error naming the field and the module.
func TestWithPolicyRefuses(t *testing.T) {
	for _, tc := range []struct {
		p     retry.Policy
		field string
	}{
		{retry.Policy{MaxAttempts: -4}, "MaxAttempts"},
		{retry.Policy{Multiplier: 0.5}, "Multiplier"},
		{retry.Policy{AttemptTimeout: time.Second}, "AttemptTimeout"},
	} {
		o, err := retrygax.WithPolicy(tc.p)
		if err == nil || o != nil || !strings.Contains(err.Error(), tc.field) || !strings.HasPrefix(err.Error(), "retrygax: ") {
			t.Errorf("WithPolicy(%+v) = %v, %v; want an error naming retrygax and %s", tc.p, o, err, tc.field)
		}
	}
}

// A Throttle that rejects (here: fed 100,000 overloads, so it rejects
// with probability 0.99999) turns retries into local rejections: they cost
// attempts, as in retry.Do, and send nothing.
func TestThrottleRejectsRetries(t *testing.T) {
	th, err := retry.NewThrottle(retry.ThrottleConfig{MaxProbability: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 100_000 {
		account.Record(th, false)
	}
	var rec retrytest.Recorder
	p := fast
	p.MaxAttempts = 3
	p.Throttle = th
	p.Observer = &rec
	f := &fakeRedis{script: failing(100, status.Error(codes.Unavailable, "down"))}
	c := grpcClient(t, f)
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p)}
	if _, err := getInstance(t.Context(), c); status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v", err)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("server saw %d calls, want 1: the retries were rejected locally", n)
	}
	want := []retry.EventKind{retry.EventAttempt, retry.EventRetry, retry.EventThrottled, retry.EventRetry, retry.EventThrottled, retry.EventDone}
	if !slices.Equal(rec.Kinds(), want) {
		t.Fatalf("events = %v, want %v", rec.Kinds(), want)
	}
}

// The server says "do not retry" (grpc-retry-pushback-ms: -1, gRFC A6) in
// a trailer that gax does not pass on: retrygrpc under WithPolicy must
// tell it, so that stacking the layers, as recommended, still makes one
// call, as retrygrpc alone does.
func TestGRPCStackedPushbackStop(t *testing.T) {
	for _, stacked := range []bool{false, true} {
		f := &fakeRedis{
			script:  failing(100, status.Error(codes.Unavailable, "go away")),
			trailer: metadata.Pairs("grpc-retry-pushback-ms", "-1"),
		}
		c := grpcClient(t, f, mustDial(fast)...)
		if stacked {
			c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(fast)}
		}
		_, err := getInstance(t.Context(), c)
		if n := f.calls.Load(); n != 1 || status.Code(err) != codes.Unavailable {
			t.Fatalf("stacked %v: server saw %d calls, err %v; want 1, Unavailable", stacked, n, err)
		}
	}
}

// A response larger than the client's grpc.MaxCallRecvMsgSize fails with
// RESOURCE_EXHAUSTED, a retried code, after the server ran the method:
// WithPolicy alone does not retry it (response headers arrived), nor does
// retrygrpc below it, which says so to WithPolicy.
func TestGRPCStackedCommittedNotRetried(t *testing.T) {
	for _, stacked := range []bool{false, true} {
		f := &fakeRedis{}
		var dopts []grpc.DialOption
		if stacked {
			dopts = mustDial(fast)
		}
		c := grpcClient(t, f, dopts...)
		c.CallOptions.GetInstance = []gax.CallOption{
			gax.WithGRPCOptions(grpc.MaxCallRecvMsgSize(10)), // before WithPolicy, which adds to them
			mustPolicy(fast),
		}
		_, err := getInstance(t.Context(), c)
		if n := f.calls.Load(); n != 1 || status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("over retrygrpc %v: server saw %d calls, err %v; want 1, ResourceExhausted", stacked, n, err)
		}
	}
}

// ThrottleConfig.Accepted decides what counts as accepted, as in retry.Do:
// with a rule that accepts everything, 20 UNAVAILABLE answers leave the
// rejection probability at 0. The rule sees grpc's error for each attempt.
func TestThrottleAcceptedRule(t *testing.T) {
	var seen atomic.Int32
	th, err := retry.NewThrottle(retry.ThrottleConfig{Accepted: func(err error) bool {
		if status.Code(err) == codes.Unavailable {
			seen.Add(1)
		}
		return true
	}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRedis{script: failing(1000, status.Error(codes.Unavailable, "down"))}
	c := grpcClient(t, f)
	p := fast
	p.MaxAttempts = 1
	p.Throttle = th
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p)}
	for range 20 {
		getInstance(t.Context(), c)
	}
	if pr, n := th.Probability(), seen.Load(); pr != 0 || n != 20 {
		t.Fatalf("rejection probability %v after 20 UNAVAILABLE that Accepted accepted, Accepted saw %d; want 0 and 20", pr, n)
	}
}

// A request over grpc.MaxCallSendMsgSize fails on the client, unsent, with
// RESOURCE_EXHAUSTED, the same at every attempt: WithPolicy makes it once.
func TestGRPCRequestTooLargeNotRetried(t *testing.T) {
	var attempts atomic.Int32
	count := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		attempts.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	f := &fakeRedis{}
	c := grpcClient(t, f, count)
	c.CallOptions.GetInstance = []gax.CallOption{
		gax.WithGRPCOptions(grpc.MaxCallSendMsgSize(3)),
		mustPolicy(fast),
	}
	_, err := getInstance(t.Context(), c)
	if n := attempts.Load(); n != 1 || f.calls.Load() != 0 || status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("%d attempts, %d at the server, err %v; want 1, 0, ResourceExhausted", n, f.calls.Load(), err)
	}
}
