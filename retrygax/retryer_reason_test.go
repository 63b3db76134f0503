package retrygax_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	redis "cloud.google.com/go/redis/apiv1"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygax"
	"github.com/retrykit/retry/retrytest"
)

// A call whose context ends during an attempt gives up with ReasonContext
// and the context's error, as retry.Do does, not as a permanent failure
// (retryotel's retry.reason would say "permanent" for every gax timeout).
func TestContextEndReportedAsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c := grpcClient(t, &fakeRedis{script: func(int) error {
		cancel()
		time.Sleep(50 * time.Millisecond) // the client sees its context end first
		return status.Error(codes.Unavailable, "down")
	}})
	var d retrytest.Recorder
	p := fast
	p.Observer = &d
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p)}
	if _, err := getInstance(ctx, c); status.Code(err) != codes.Canceled {
		t.Fatalf("err %v, want CANCELLED", err)
	}
	if done, ok := d.Done(); !ok || done.Reason != retry.ReasonContext || !errors.Is(done.Err, context.Canceled) {
		t.Fatalf("EventDone %+v: want ReasonContext and an error matching context.Canceled", done)
	}
}

// A REST status the caller chose not to retry is a permanent failure even
// when its gRPC mapping is DEADLINE_EXCEEDED (504) or CANCELLED (499).
func TestRESTGatewayTimeoutNotAContextEnd(t *testing.T) {
	for _, code := range []int{504, 499} {
		var calls atomic.Int32
		c := restClient(t, &calls, func(int) restAnswer { return restAnswer{code: code} }, nil)
		var d retrytest.Recorder
		p := fast
		p.Observer = &d
		c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p, retrygax.WithRetryStatus(func(int) bool { return false }))}
		getInstance(t.Context(), c)
		if done, ok := d.Done(); !ok || done.Reason != retry.ReasonPermanent {
			t.Fatalf("%d: EventDone %+v: want ReasonPermanent", code, done)
		}
	}
}

// Without MaxElapsed, Elapsed is measured from the first failure, as
// retry.Do measures Error.Elapsed: a slow first attempt is not in it.
func TestElapsedFromFirstFailureWithoutMaxElapsed(t *testing.T) {
	c := grpcClient(t, &fakeRedis{script: func(n int) error {
		if n == 1 {
			time.Sleep(200 * time.Millisecond)
			return status.Error(codes.Unavailable, "down")
		}
		return nil
	}})
	var d retrytest.Recorder
	p := fast
	p.Observer = &d
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p)}
	if _, err := getInstance(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	if first, ok := d.First(retry.EventRetry); !ok || first.Elapsed >= 200*time.Millisecond {
		t.Fatalf("first EventRetry %+v: want an Elapsed without the first attempt's 200ms", first)
	}
}

// A retry the Throttle rejects reports, as retry.Do does, the waits before
// it: here the first retry's Delay; the attempt after it is let through.
func TestThrottledRetryReportsWaited(t *testing.T) {
	th, err := retry.NewThrottle(retry.ThrottleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var rec retrytest.Recorder
	p := fast
	p.Throttle = th
	p.Observer = retry.Observers(&rec, retry.ObserverFunc(func(_ context.Context, e retry.Event) {
		switch e.Kind {
		case retry.EventRetry:
			if e.Attempt == 1 {
				th.Override(retry.ThrottleRejectAll) // reject attempt 2
			}
		case retry.EventThrottled:
			th.Override(retry.ThrottleAllowAll) // let attempt 3 through
		}
	}))
	c := grpcClient(t, &fakeRedis{script: failing(1, status.Error(codes.Unavailable, "down"))})
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p)}
	if _, err := getInstance(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	var first, throttled *retry.Event
	if e, ok := rec.First(retry.EventRetry); ok {
		first = &e
	}
	if ts := rec.Of(retry.EventThrottled); len(ts) > 0 {
		throttled = &ts[len(ts)-1]
	}
	if first == nil || throttled == nil || throttled.Waited != first.Delay || first.Delay == 0 {
		t.Fatalf("first retry %+v, throttled attempt %+v: want the throttled attempt's Waited to be the first retry's Delay", first, throttled)
	}
}

// retryDelays runs calls calls of c with p (an Observer is added) and
// returns the Delay of every EventRetry.
func retryDelays(t *testing.T, c *redis.CloudRedisClient, p retry.Policy, calls int) []time.Duration {
	t.Helper()
	var rec retrytest.Recorder
	p.Observer = &rec
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p)}
	for range calls {
		getInstance(t.Context(), c)
	}
	return rec.Waits()
}

// A server's RetryInfo wait is jittered (up to 10 % more, drawn afresh),
// so clients told the same wait do not come back together.
func TestServerDelayJittered(t *testing.T) {
	const hint = 5 * time.Millisecond
	c := grpcClient(t, &fakeRedis{script: func(int) error { return retryInfoErr(codes.Unavailable, hint) }})
	delays := retryDelays(t, c, retry.Policy{Initial: retry.Immediate, MaxAttempts: 2}, 10)
	distinct := map[time.Duration]bool{}
	for _, d := range delays {
		distinct[d] = true
		if d < hint || d > hint+hint/10 {
			t.Errorf("wait %v after RetryInfo %v: want it plus up to 10 %%", d, hint)
		}
	}
	if len(delays) != 10 || len(distinct) < 2 {
		t.Errorf("waits %v: want 10, jittered", delays)
	}
}

// Over REST, a google.rpc.RetryInfo in the JSON error's details sets the
// least wait, as it does over gRPC.
func TestRESTRetryInfo(t *testing.T) {
	var calls atomic.Int32
	c := restClient(t, &calls, func(n int) restAnswer {
		if n == 1 {
			return restAnswer{code: 429, details: []any{map[string]any{
				"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.05s"}}}
		}
		return restAnswer{code: 200}
	}, nil)
	delays := retryDelays(t, c, fast, 1)
	if len(delays) != 1 || delays[0] < 50*time.Millisecond || calls.Load() != 2 {
		t.Fatalf("waits %v, %d calls: want one retry after at least the 50ms of RetryInfo", delays, calls.Load())
	}
}
