package retrygax_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/retrytest"
)

// Issue 24, item 5: retrygax above retrygrpc's interceptor, whose first
// wait the call's context ends. The interceptor's error matches the
// context's, so retrygax gives up at once with ReasonContext: no retry
// granted and never sent, no Budget token spent, and its Observer is told
// attempt, done. The cancel lands right after the first attempt (an
// interceptor below retrygrpc's cancels as it returns), with a plain
// policy below, whose first attempt retrygrpc makes itself; and at the
// start of the wait (the lower policy's Observer cancels at EventRetry).
func TestContextEndsInLowerLayersWait(t *testing.T) {
	for _, where := range []string{"after the attempt", "in the wait"} {
		t.Run(where, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			lower := retry.Policy{Initial: 10 * time.Second, MaxAttempts: 3} // a wait the test never sits through
			var dopts []grpc.DialOption
			if where == "in the wait" {
				lower.Observer = retry.ObserverFunc(func(_ context.Context, e retry.Event) {
					if e.Kind == retry.EventRetry {
						cancel()
					}
				})
				dopts = mustDial(lower)
			} else {
				dopts = append(mustDial(lower), grpc.WithChainUnaryInterceptor(
					func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
						err := invoker(ctx, method, req, reply, cc, opts...)
						cancel() // below retrygrpc's interceptor: after its attempt, before its wait
						return err
					}))
			}
			f := &fakeRedis{script: failing(100, status.Error(codes.Unavailable, "down"))}
			c := grpcClient(t, f, dopts...)

			b, err := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: 0.1, Window: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			var rec retrytest.Recorder
			p := fast
			p.Budget = b // one retry in reserve
			p.Observer = &rec
			c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p)}
			start := time.Now()
			_, err = getInstance(ctx, c)
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("the call took %v: it sat through a wait", took)
			}
			if !errors.Is(err, context.Canceled) || status.Code(err) != codes.Canceled {
				t.Fatalf("err = %v (status.Code %v): want one matching context.Canceled, status CANCELLED", err, status.Code(err))
			}
			if n := f.calls.Load(); n != 1 {
				t.Fatalf("server saw %d calls, want 1", n)
			}
			kinds, done := rec.Kinds(), rec.Last()
			if want := []retry.EventKind{retry.EventAttempt, retry.EventDone}; !slices.Equal(kinds, want) {
				t.Fatalf("retrygax's Observer told %v, want %v (no phantom retry)", kinds, want)
			}
			if d, _ := done.Done(); d.Reason != retry.ReasonContext || !errors.Is(d.Err, context.Canceled) {
				t.Fatalf("EventDone %+v: want ReasonContext and an error matching context.Canceled", d)
			}
			if !account.AllowRetry(b) {
				t.Fatal("the Budget's one retry was spent on a retry never sent")
			}
		})
	}
}
