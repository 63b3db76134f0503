package retrygrpc_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygrpc"
	"github.com/retrykit/retry/retrytest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// fast is a policy whose waits do not matter to the test.
var fast = retry.Policy{Initial: time.Millisecond, MaxDelay: 5 * time.Millisecond, MaxAttempts: 4}

func TestUnaryCodes(t *testing.T) {
	for _, tc := range []struct {
		code  codes.Code
		calls int // attempts the server sees when it fails twice, then succeeds
	}{
		{codes.Unavailable, 3},
		{codes.ResourceExhausted, 3},
		{codes.Internal, 1},
		{codes.Unknown, 1},
		{codes.DeadlineExceeded, 1}, // no AttemptTimeout: not retried
		{codes.InvalidArgument, 1},
		{codes.NotFound, 1},
		{codes.PermissionDenied, 1},
		{codes.Aborted, 1},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			s := &echoServer{unary: failFirst(2, status.Error(tc.code, "scripted"))}
			cc := serve(t, s, dialOptions(t, fast)...)
			_, err := callUnary(t.Context(), cc, methodUnary)
			if got := s.Calls(methodUnary); got != tc.calls {
				t.Fatalf("server saw %d attempts, want %d", got, tc.calls)
			}
			if tc.calls == 3 {
				if err != nil {
					t.Fatalf("err = %v, want success", err)
				}
				return
			}
			// Not retried: the error is exactly what the server said.
			if _, ok := err.(interface{ GRPCStatus() *status.Status }); !ok {
				t.Fatalf("err = %T %v, want the status error itself", err, err)
			}
			if status.Code(err) != tc.code || status.Convert(err).Message() != "scripted" {
				t.Fatalf("err = %v, want %v scripted", err, tc.code)
			}
		})
	}
}

func TestUnaryGivesUp(t *testing.T) {
	s := &echoServer{unary: failFirst(100, status.Error(codes.Unavailable, "down"))}
	p := fast
	p.MaxAttempts = 3
	cc := serve(t, s, dialOptions(t, p)...)
	_, err := callUnary(t.Context(), cc, methodUnary)
	var re *retry.Error
	if !errors.As(err, &re) || re.Reason != retry.ReasonAttempts || re.Attempts != 3 {
		t.Fatalf("err = %v, want *retry.Error after 3 attempts", err)
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("status.Code = %v, want Unavailable", status.Code(err))
	}
	if got := s.Calls(methodUnary); got != 3 {
		t.Fatalf("server saw %d attempts, want 3", got)
	}
}

func TestUnaryPreviousAttempts(t *testing.T) {
	s := &echoServer{unary: failFirst(3, status.Error(codes.Unavailable, "down"))}
	cc := serve(t, s, dialOptions(t, fast)...)
	if _, err := callUnary(t.Context(), cc, methodUnary); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Previous(), []string{"", "1", "2", "3"}; !slices.Equal(got, want) {
		t.Fatalf("grpc-previous-rpc-attempts seen by the server = %q, want %q", got, want)
	}
}

func TestWithCodes(t *testing.T) {
	s := &echoServer{unary: failFirst(1, status.Error(codes.Internal, "oops"))}
	cc := serve(t, s, dialOptions(t, fast, retrygrpc.WithCodes(codes.Unavailable, codes.Internal))...)
	if _, err := callUnary(t.Context(), cc, methodUnary); err != nil {
		t.Fatal(err)
	}
	if got := s.Calls(methodUnary); got != 2 {
		t.Fatalf("server saw %d attempts, want 2", got)
	}

	// The set is replaced: RESOURCE_EXHAUSTED is no longer retried.
	s2 := &echoServer{unary: failFirst(1, status.Error(codes.ResourceExhausted, "quota"))}
	cc2 := serve(t, s2, dialOptions(t, fast, retrygrpc.WithCodes(codes.Unavailable, codes.Internal))...)
	if _, err := callUnary(t.Context(), cc2, methodUnary); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("err = %v, want ResourceExhausted", err)
	}
	if got := s2.Calls(methodUnary); got != 1 {
		t.Fatalf("server saw %d attempts, want 1", got)
	}
}

func TestWithMethods(t *testing.T) {
	s := &echoServer{unary: failFirst(1, status.Error(codes.Unavailable, "down"))}
	cc := serve(t, s, dialOptions(t, fast, retrygrpc.WithMethods(methodUnary))...)
	if _, err := callUnary(t.Context(), cc, methodUnary); err != nil {
		t.Fatal(err)
	}
	if _, err := callUnary(t.Context(), cc, methodOther); status.Code(err) != codes.Unavailable {
		t.Fatalf("Other: err = %v, want Unavailable at once", err)
	}
	if a, b := s.Calls(methodUnary), s.Calls(methodOther); a != 2 || b != 1 {
		t.Fatalf("server saw Unary %d, Other %d attempts; want 2 and 1", a, b)
	}
}

func TestPushback(t *testing.T) {
	for _, tc := range []struct {
		value   string
		calls   int
		minWait time.Duration
	}{
		{"200", 2, 200 * time.Millisecond},
		{"0", 2, 0},
		{"-1", 1, 0},
		{"garbage", 1, 0},
		{"1.5", 1, 0},
		{"", 1, 0},
		{"600000", 1, 0},                  // 10 min: more than DefaultMaxServerWait, returned at once
		{"99999999999999999999999", 1, 0}, // beyond a Duration: more than the maximum
	} {
		t.Run(tc.value, func(t *testing.T) {
			s := &echoServer{unary: withPushback(1, tc.value)}
			cc := serve(t, s, dialOptions(t, fast)...)
			start := time.Now()
			_, err := callUnary(t.Context(), cc, methodUnary)
			took := time.Since(start)
			if got := s.Calls(methodUnary); got != tc.calls {
				t.Fatalf("server saw %d attempts, want %d (err %v)", got, tc.calls, err)
			}
			if tc.calls == 1 {
				if status.Code(err) != codes.Unavailable {
					t.Fatalf("err = %v, want Unavailable", err)
				}
				if took > 150*time.Millisecond {
					t.Fatalf("took %v, want the error at once", took)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The wait is the server's plus a jitter of at most 10% (and
			// not the policy's 1 ms).
			if took < tc.minWait || took > tc.minWait+tc.minWait/10+150*time.Millisecond {
				t.Fatalf("took %v, want about %v", took, tc.minWait)
			}
		})
	}
}

func TestPushbackIgnoredWithNegativeMaxServerWait(t *testing.T) {
	s := &echoServer{unary: withPushback(1, "200")}
	cc := serve(t, s, dialOptions(t, fast, retrygrpc.WithMaxServerWait(-1))...)
	start := time.Now()
	if _, err := callUnary(t.Context(), cc, methodUnary); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 150*time.Millisecond {
		t.Fatalf("took %v: the 200 ms pushback should have been ignored", took)
	}
	// "Do not retry" is still obeyed.
	s2 := &echoServer{unary: withPushback(1, "-1")}
	cc2 := serve(t, s2, dialOptions(t, fast, retrygrpc.WithMaxServerWait(-1))...)
	callUnary(t.Context(), cc2, methodUnary)
	if got := s2.Calls(methodUnary); got != 1 {
		t.Fatalf("server saw %d attempts, want 1", got)
	}
}

func TestRetryInfo(t *testing.T) {
	s := &echoServer{unary: failFirst(1, withRetryInfo(codes.ResourceExhausted, 200*time.Millisecond))}
	cc := serve(t, s, dialOptions(t, fast)...)
	start := time.Now()
	if _, err := callUnary(t.Context(), cc, methodUnary); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if took < 200*time.Millisecond || took > 400*time.Millisecond {
		t.Fatalf("took %v, want about 200 ms (RetryInfo)", took)
	}
	if got := s.Calls(methodUnary); got != 2 {
		t.Fatalf("server saw %d attempts, want 2", got)
	}
}

func TestRetryInfoOnCodeNotRetried(t *testing.T) {
	s := &echoServer{unary: failFirst(1, withRetryInfo(codes.InvalidArgument, time.Millisecond))}
	cc := serve(t, s, dialOptions(t, fast)...)
	if _, err := callUnary(t.Context(), cc, methodUnary); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("err = %v", err)
	}
	if got := s.Calls(methodUnary); got != 1 {
		t.Fatalf("server saw %d attempts, want 1: a hint does not make a code retryable", got)
	}
}

func TestDeadlineShorterThanHint(t *testing.T) {
	s := &echoServer{unary: failFirst(1, withRetryInfo(codes.Unavailable, time.Second))}
	cc := serve(t, s, dialOptions(t, fast)...)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := callUnary(ctx, cc, methodUnary)
	if took := time.Since(start); took > 150*time.Millisecond {
		t.Fatalf("took %v: should give up at once rather than sleep past the deadline", took)
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Reason != retry.ReasonDeadline {
		t.Fatalf("err = %v, want *retry.Error with ReasonDeadline", err)
	}
	if status.Code(err) != codes.Unavailable || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v: want the last status and errors.Is DeadlineExceeded", err)
	}
	if got := s.Calls(methodUnary); got != 1 {
		t.Fatalf("server saw %d attempts, want 1", got)
	}
}

func TestMaxElapsedShorterThanHint(t *testing.T) {
	s := &echoServer{unary: withPushback(1, "500")}
	p := fast
	p.MaxElapsed = 100 * time.Millisecond
	cc := serve(t, s, dialOptions(t, p)...)
	_, err := callUnary(t.Context(), cc, methodUnary)
	var re *retry.Error
	if !errors.As(err, &re) || re.Reason != retry.ReasonTimeBudget {
		t.Fatalf("err = %v, want ReasonTimeBudget", err)
	}
	if got := s.Calls(methodUnary); got != 1 {
		t.Fatalf("server saw %d attempts, want 1", got)
	}
}

func TestAttemptTimeout(t *testing.T) {
	// The first attempt hangs until its deadline; the second answers.
	slow := func(ctx context.Context, n int, in string) (string, error) {
		if n == 1 {
			<-ctx.Done()
			return "", status.FromContextError(ctx.Err()).Err()
		}
		return in, nil
	}
	p := fast
	p.AttemptTimeout = 50 * time.Millisecond
	s := &echoServer{unary: slow}
	cc := serve(t, s, unaryOnly(t, p)...)
	if _, err := callUnary(t.Context(), cc, methodUnary); err != nil {
		t.Fatal(err)
	}
	if got := s.Calls(methodUnary); got != 2 {
		t.Fatalf("server saw %d attempts, want 2", got)
	}

	// DEADLINE_EXCEEDED reported by the server itself, before the client's
	// attempt deadline, is retried too when there is an AttemptTimeout.
	p.AttemptTimeout = time.Second
	s2 := &echoServer{unary: failFirst(1, status.Error(codes.DeadlineExceeded, "backend deadline"))}
	cc2 := serve(t, s2, unaryOnly(t, p)...)
	if _, err := callUnary(t.Context(), cc2, methodUnary); err != nil {
		t.Fatal(err)
	}
	if got := s2.Calls(methodUnary); got != 2 {
		t.Fatalf("server saw %d attempts, want 2", got)
	}
}

func TestCallerDeadlineNotRetried(t *testing.T) {
	slow := func(ctx context.Context, n int, in string) (string, error) {
		<-ctx.Done()
		return "", status.FromContextError(ctx.Err()).Err()
	}
	p := fast
	p.AttemptTimeout = time.Second // longer than the caller's deadline
	s := &echoServer{unary: slow}
	cc := serve(t, s, unaryOnly(t, p)...)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := callUnary(ctx, cc, methodUnary)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if got := s.Calls(methodUnary); got != 1 {
		t.Fatalf("server saw %d attempts, want 1", got)
	}
}

// Two retrying interceptors on one connection: the outer one sees the
// inner one's *retry.Error and does not retry it, so the server sees one
// layer's worth of attempts.
func TestStackedInterceptors(t *testing.T) {
	p := fast
	p.MaxAttempts = 3
	s := &echoServer{unary: failFirst(100, status.Error(codes.Unavailable, "down"))}
	cc := serve(t, s, grpc.WithChainUnaryInterceptor(
		unaryInterceptor(t, p), // outer
		unaryInterceptor(t, p), // inner
	))
	_, err := callUnary(t.Context(), cc, methodUnary)
	if got := s.Calls(methodUnary); got != 3 {
		t.Fatalf("server saw %d attempts, want 3 (one layer)", got)
	}
	if !retry.IsExhausted(err) || status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v", err)
	}
}

// A service config that enables grpc-go's own retry would multiply the
// calls under the interceptor; DialOptions turns it off.
func TestServiceConfigRetryDisabled(t *testing.T) {
	const sc = `{"methodConfig": [{"name": [{"service": "retrygrpc.test.Echo"}],
		"retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.001s", "maxBackoff": "0.002s",
		"backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`
	p := fast
	p.MaxAttempts = 3

	// The interceptor alone, over grpc-go's configured retry: 3 × 4.
	s := &echoServer{unary: failFirst(100, status.Error(codes.Unavailable, "down"))}
	cc := serve(t, s, grpc.WithDefaultServiceConfig(sc), grpc.WithUnaryInterceptor(unaryInterceptor(t, p)))
	callUnary(t.Context(), cc, methodUnary)
	if got := s.Calls(methodUnary); got != 12 {
		t.Fatalf("interceptor over grpc-go retry: server saw %d attempts, want 12", got)
	}

	// DialOptions: one layer.
	s2 := &echoServer{unary: failFirst(100, status.Error(codes.Unavailable, "down"))}
	cc2 := serve(t, s2, append(dialOptions(t, p), grpc.WithDefaultServiceConfig(sc))...)
	callUnary(t.Context(), cc2, methodUnary)
	if got := s2.Calls(methodUnary); got != 3 {
		t.Fatalf("DialOptions: server saw %d attempts, want 3", got)
	}
}

func TestBudgetRefuses(t *testing.T) {
	b, err := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: 0.1, Window: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p := fast
	p.MaxAttempts = 5
	p.Budget = b // a reserve of one retry
	s := &echoServer{unary: failFirst(100, status.Error(codes.Unavailable, "down"))}
	cc := serve(t, s, dialOptions(t, p)...)
	_, err = callUnary(t.Context(), cc, methodUnary)
	if !errors.Is(err, retry.ErrBudgetRefused) || status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v, want budget exhausted wrapping Unavailable", err)
	}
	if got := s.Calls(methodUnary); got != 2 {
		t.Fatalf("server saw %d attempts, want 2 (one retry granted)", got)
	}
}

func TestThrottleCountsOverload(t *testing.T) {
	for _, tc := range []struct {
		code     codes.Code
		overload bool
	}{
		{codes.Unavailable, true},
		{codes.ResourceExhausted, true},
		{codes.InvalidArgument, false},
		{codes.NotFound, false},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			th, err := retry.NewThrottle(retry.ThrottleConfig{})
			if err != nil {
				t.Fatal(err)
			}
			p := fast
			p.MaxAttempts = 1
			p.Throttle = th
			s := &echoServer{unary: failFirst(1000, status.Error(tc.code, "x"))}
			cc := serve(t, s, dialOptions(t, p)...)
			for range 20 {
				callUnary(t.Context(), cc, methodUnary)
			}
			if got := th.Probability() > 0; got != tc.overload {
				t.Fatalf("throttle probability %v after 20 %v: overload = %v, want %v", th.Probability(), tc.code, got, tc.overload)
			}
		})
	}
}

// An invalid Policy is refused by DialOptions, so no call is made with it
// (TestConstructorsRefuse checks each constructor).
func TestInvalidPolicy(t *testing.T) {
	s := &echoServer{}
	dopts, err := retrygrpc.DialOptions(retry.Policy{MaxAttempts: -5})
	if !errors.Is(err, retry.ErrInvalidPolicy) || dopts != nil {
		t.Fatalf("DialOptions: %v, %v; want ErrInvalidPolicy and no options", dopts, err)
	}
	if got := s.Calls(methodUnary); got != 0 {
		t.Fatalf("server saw %d attempts, want 0", got)
	}
}

// The interceptor adds no allocation of its own to a successful call,
// measured over a real loopback connection side by side with the bare
// call. Reading the response headers (for gRFC A6's commit rule) and the
// trailer (for grpc-retry-pushback-ms) makes grpc-go copy both: that is
// compared with a bare call that asks for both too, and the difference
// from a plain bare call, which the package documentation states, is
// checked and logged.
func TestUnaryNoExtraAllocs(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts: run without -short and -race")
	}
	s := &echoServer{}
	bare := serve(t, s)
	wrapped := serve(t, s, dialOptions(t, retry.Policy{})...)
	ctx := context.Background()
	measure := func(cc *grpc.ClientConn, opts ...grpc.CallOption) float64 {
		for range 50 { // warm up the connection and the pools
			callUnary(ctx, cc, methodUnary, opts...)
		}
		return testing.AllocsPerRun(500, func() { callUnary(ctx, cc, methodUnary, opts...) })
	}
	var header, trailer metadata.MD
	plain := measure(bare)
	withBoth := measure(bare, grpc.Header(&header), grpc.Trailer(&trailer))
	b := measure(wrapped)
	t.Logf("allocs per call: bare %.1f, bare with grpc.Header and grpc.Trailer %.1f, with interceptor %.1f", plain, withBoth, b)
	if b > withBoth+0.5 {
		t.Fatalf("interceptor adds %.1f allocations per successful call beyond grpc's header and trailer copies", b-withBoth)
	}
	// doc.go: "5 allocations more than a bare call": grpc-go's copies of
	// the headers and the trailer of this echo service.
	if d := b - plain; d < 4.5 || d > 5.5 {
		t.Fatalf("interceptor call makes %.1f allocations more than a bare call; doc.go says 5", d)
	}
}

// The policy's Observer sees the interceptor's attempts as retry.Do's.
func TestUnaryObserver(t *testing.T) {
	var rec retrytest.Recorder
	p := fast
	p.Observer = &rec
	s := &echoServer{unary: failFirst(1, status.Error(codes.Unavailable, "down"))}
	cc := serve(t, s, dialOptions(t, p)...)
	if _, err := callUnary(t.Context(), cc, methodUnary); err != nil {
		t.Fatal(err)
	}
	if want := []retry.EventKind{retry.EventAttempt, retry.EventRetry, retry.EventAttempt, retry.EventDone}; !slices.Equal(rec.Kinds(), want) {
		t.Fatalf("events = %v, want %v", rec.Kinds(), want)
	}
}

// The caller's context ends during the first attempt: the error is grpc's,
// unchanged, whether or not the policy lets the first attempt skip the loop.
func TestUnaryCallerCancelDuringFirstAttempt(t *testing.T) {
	for _, p := range []retry.Policy{fast, {MaxAttempts: 3, MaxElapsed: time.Minute}} {
		ctx, cancel := context.WithCancel(t.Context())
		s := &echoServer{unary: func(_ context.Context, n int, in string) (string, error) {
			cancel() // the caller gives up while the server answers
			return "", status.Error(codes.Unavailable, "down")
		}}
		cc := serve(t, s, dialOptions(t, p)...)
		_, err := callUnary(ctx, cc, methodUnary)
		if c := status.Code(err); c != codes.Canceled && c != codes.Unavailable {
			t.Fatalf("policy %+v: err = %v, want grpc's own error", p, err)
		}
		if _, ok := err.(interface{ GRPCStatus() *status.Status }); !ok {
			t.Fatalf("policy %+v: err = %T %v, want the status error itself", p, err, err)
		}
		if got := s.Calls(methodUnary); got != 1 {
			t.Fatalf("server saw %d attempts, want 1", got)
		}
	}
}

// gRFC A6's commit rule: an attempt that received response headers is not
// retried, whatever its code, since the server's application answered and
// may have applied the call. A response over grpc.MaxCallRecvMsgSize is
// the case that matters: grpc-go fails it on the client with
// RESOURCE_EXHAUSTED, a default retried code, after the method ran. The
// error tells enclosing retry loops not to retry it either.
func TestUnaryNotRetriedAfterHeaders(t *testing.T) {
	for _, tc := range []struct {
		name  string
		unary func(context.Context, int, string) (string, error)
		opts  []grpc.CallOption
		code  codes.Code
	}{
		{"response over MaxCallRecvMsgSize", func(context.Context, int, string) (string, error) {
			return strings.Repeat("x", 1000), nil // applied, then refused by the client
		}, []grpc.CallOption{grpc.MaxCallRecvMsgSize(100)}, codes.ResourceExhausted},
		{"headers then UNAVAILABLE", func(ctx context.Context, _ int, _ string) (string, error) {
			if err := grpc.SendHeader(ctx, metadata.Pairs("x", "y")); err != nil {
				return "", err
			}
			return "", status.Error(codes.Unavailable, "after headers")
		}, nil, codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range []retry.Policy{fast, {Initial: time.Millisecond, MaxAttempts: 4, MaxElapsed: time.Minute}} {
				s := &echoServer{unary: tc.unary}
				cc := serve(t, s, dialOptions(t, p)...)
				var calls int
				err := retry.Do(t.Context(), fast, func(ctx context.Context) error {
					calls++
					_, err := callUnary(ctx, cc, methodUnary, tc.opts...)
					return err
				})
				if got := s.Calls(methodUnary); got != 1 || calls != 1 {
					t.Fatalf("policy %+v: the method ran %d times, retry.Do above made %d calls; want 1 and 1 (err %v)", p, got, calls, err)
				}
				if status.Code(err) != tc.code || !retry.IsExhausted(err) {
					t.Fatalf("policy %+v: err = %v, want %v marked as given up on", p, err, tc.code)
				}
			}
		})
	}
}

// A server's "do not retry" (a negative pushback) reaches enclosing retry
// loops, which cannot read the trailer: the error says a retry layer gave
// up, and status.Code still gives the server's code.
func TestPushbackStopTellsEnclosingLoops(t *testing.T) {
	// "do not retry", and a wait of 10 min, beyond WithMaxServerWait's 5.
	for _, pushback := range []string{"-1", "600000"} {
		s := &echoServer{unary: withPushback(100, pushback)}
		cc := serve(t, s, dialOptions(t, fast)...)
		calls := 0
		err := retry.Do(t.Context(), fast, func(ctx context.Context) error {
			calls++
			_, err := callUnary(ctx, cc, methodUnary)
			return err
		})
		if got := s.Calls(methodUnary); got != 1 || calls != 1 {
			t.Fatalf("pushback %s: server saw %d attempts, retry.Do made %d calls; want 1 and 1 (err %v)", pushback, got, calls, err)
		}
		st, ok := status.FromError(err)
		if !ok || st.Code() != codes.Unavailable || status.Code(err) != codes.Unavailable || !retry.IsExhausted(err) {
			t.Fatalf("pushback %s: err = %v, want Unavailable marked as given up on", pushback, err)
		}
	}

	// The stream interceptor: a stream opened under retry.Do.
	s2 := &echoServer{bidi: func(_ int, st grpc.ServerStream) error {
		st.SetTrailer(metadata.Pairs("grpc-retry-pushback-ms", "-1"))
		return status.Error(codes.Unavailable, "go away")
	}}
	cc2 := serve(t, s2, dialOptions(t, fast)...)
	calls := 0
	err := retry.Do(t.Context(), fast, func(ctx context.Context) error {
		calls++
		cs, err := cc2.NewStream(ctx, bidiDesc, methodBidi)
		if err != nil {
			return err
		}
		sendAll(t, cs, "a")
		_, err = recvAll(cs)
		return err
	})
	if got := s2.Calls(methodBidi); got != 1 || calls != 1 {
		t.Fatalf("stream: server saw %d attempts, retry.Do made %d calls; want 1 and 1 (err %v)", got, calls, err)
	}
	if status.Code(err) != codes.Unavailable || !retry.IsExhausted(err) {
		t.Fatalf("stream: err = %v, want Unavailable marked as given up on", err)
	}
}

// A server delay too large for a time.Duration (the parsers saturate at
// math.MaxInt64) is beyond any cap, WithMaxServerWait(math.MaxInt64)
// included: the call ends at once instead of waiting 292 years. The
// bubble's fake clock would let such a wait pass in an instant, so the
// test looks at it.
func TestSaturatedServerDelayEndsTheCall(t *testing.T) {
	const huge = "99999999999999999999999" // ms: far beyond a Duration
	opts := []retrygrpc.Option{retrygrpc.WithMaxServerWait(math.MaxInt64)}
	t.Run("unary", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := &echoServer{unary: withPushback(1, huge)}
			cc := serveInBubble(t, s, dialOptions(t, fast, opts...)...)
			start := time.Now()
			_, err := callUnary(t.Context(), cc, methodUnary)
			if took, got := time.Since(start), s.Calls(methodUnary); took > time.Second || got != 1 || status.Code(err) != codes.Unavailable {
				t.Fatalf("server saw %d attempts in %v (fake time), err %v; want 1 at once, Unavailable", got, took, err)
			}
		})
	})
	t.Run("stream", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := &echoServer{bidi: func(n int, st grpc.ServerStream) error {
				if n > 1 {
					return echoAll(st)
				}
				st.SetTrailer(metadata.Pairs("grpc-retry-pushback-ms", huge))
				return status.Error(codes.Unavailable, "pushed back")
			}}
			cc := serveInBubble(t, s, dialOptions(t, fast, opts...)...)
			start := time.Now()
			cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
			if err != nil {
				t.Fatal(err)
			}
			sendAll(t, cs, "a")
			_, err = recvAll(cs)
			if took, got := time.Since(start), s.Calls(methodBidi); took > time.Second || got != 1 || status.Code(err) != codes.Unavailable {
				t.Fatalf("server saw %d attempts in %v (fake time), err %v; want 1 at once, Unavailable", got, took, err)
			}
		})
	})
}

// A request over grpc.MaxCallSendMsgSize fails on the client, unsent, with
// RESOURCE_EXHAUSTED, the same at every attempt: it is made once, and the
// error tells enclosing layers not to retry it either.
func TestUnaryRequestTooLargeNotRetried(t *testing.T) {
	var attempts atomic.Int32
	s := &echoServer{}
	cc := serve(t, s, append(dialOptions(t, fast), countAttempts(&attempts))...)
	_, err := callUnary(t.Context(), cc, methodUnary, grpc.MaxCallSendMsgSize(3))
	if n := attempts.Load(); n != 1 || s.Calls(methodUnary) != 0 {
		t.Fatalf("%d attempts, %d at the server, for a request that fails on the client; want 1 and 0 (err %v)", n, s.Calls(methodUnary), err)
	}
	if status.Code(err) != codes.ResourceExhausted || !retry.IsExhausted(err) {
		t.Fatalf("err = %v; want RESOURCE_EXHAUSTED marked as given up on", err)
	}
}

// A caller that forwards its incoming metadata as outgoing metadata (a
// proxy, a gateway) passes on the grpc-previous-rpc-attempts of the hop
// before. Promise (package doc): "Every retry carries the metadata
// grpc-previous-rpc-attempts with the number of earlier attempts sent
// ("1" on the first retry …); first attempts do not." So the caller's
// value is dropped, on unary calls and streams: [] then ["1"].
func TestPreviousAttemptsOfCallerDropped(t *testing.T) {
	var (
		mu   sync.Mutex
		seen [][]string
	)
	note := func(ctx context.Context) {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, md.Get(retrygrpc.HeaderPreviousAttempts))
	}
	s := &echoServer{
		unary: func(ctx context.Context, n int, in string) (string, error) {
			note(ctx)
			if n == 1 {
				return "", status.Error(codes.Unavailable, "down")
			}
			return in, nil
		},
		bidi: func(n int, st grpc.ServerStream) error {
			note(st.Context())
			if n == 1 {
				return status.Error(codes.Unavailable, "down")
			}
			return echoAll(st)
		},
	}
	cc := serve(t, s, dialOptions(t, fast)...)
	// The key both in the metadata map and appended to it.
	ctx := metadata.NewOutgoingContext(t.Context(), metadata.Pairs(retrygrpc.HeaderPreviousAttempts, "7", "x-other", "kept"))
	ctx = metadata.AppendToOutgoingContext(ctx, retrygrpc.HeaderPreviousAttempts, "3")
	for _, stream := range []bool{false, true} {
		mu.Lock()
		seen = nil
		mu.Unlock()
		callEcho(t, ctx, cc, stream)
		mu.Lock()
		got := slices.Clone(seen)
		mu.Unlock()
		if len(got) != 2 || len(got[0]) != 0 || !slices.Equal(got[1], []string{"1"}) {
			t.Fatalf("stream %v: grpc-previous-rpc-attempts per attempt = %q, want [[] [1]]", stream, got)
		}
	}
}

// A caller's grpc-previous-rpc-attempts (a proxy that forwards its
// incoming metadata) on a method that WithMethods leaves out, on unary
// calls and streams. Promise (package doc, HeaderPreviousAttempts): first
// attempts do not carry the key, and the caller's value is dropped on
// every method, those that WithMethods leaves out included (DialOptions
// makes retrykit the one retry layer: nothing else sets the key).
func TestPreviousAttemptsOfCallerDroppedOnMethodNotRetried(t *testing.T) {
	s := &echoServer{}
	cc := serve(t, s, dialOptions(t, fast, retrygrpc.WithMethods(methodOther))...)
	ctx := metadata.AppendToOutgoingContext(t.Context(), retrygrpc.HeaderPreviousAttempts, "3")
	for _, stream := range []bool{false, true} {
		callEcho(t, ctx, cc, stream)
	}
	got := s.Previous()
	if len(got) != 2 {
		t.Fatalf("the server saw %d attempts, want 2", len(got))
	}
	for i, v := range got {
		if v != "" {
			t.Fatalf("call %d (unary, then stream), a first attempt, reached the server with grpc-previous-rpc-attempts %q; want none", i+1, v)
		}
	}
}

// A call made with a context that has already ended gets grpc-go's status
// error (CANCELLED or DEADLINE_EXCEEDED), unchanged, as without the
// interceptor, on unary calls and streams, even when the Throttle would
// reject the attempt. Promise (UnaryClientInterceptor): "the attempt's
// status error, unchanged, when the first attempt's error itself ends the
// call (… the caller's context …)".
func TestEndedContextKeepsStatus(t *testing.T) {
	th, err := retry.NewThrottle(retry.ThrottleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	th.Override(retry.ThrottleRejectAll) // rejects every attempt
	p := fast
	p.Throttle = th
	s := &echoServer{}
	bare := serve(t, s)
	with := serve(t, s, dialOptions(t, p)...)
	streamErr := func(ctx context.Context, cc *grpc.ClientConn) error {
		cs, err := cc.NewStream(ctx, bidiDesc, methodBidi)
		if err != nil {
			return err
		}
		return cs.RecvMsg(new(wrapperspb.StringValue))
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, ctx := range []context.Context{cancelled, expired} {
		_, want := callUnary(ctx, bare, methodUnary)
		_, got := callUnary(ctx, with, methodUnary)
		if _, ok := got.(interface{ GRPCStatus() *status.Status }); !ok || status.Code(got) != status.Code(want) {
			t.Fatalf("unary, ctx %v: err = %T %v (status.Code %v); without the interceptor %v (status.Code %v)",
				ctx.Err(), got, got, status.Code(got), want, status.Code(want))
		}
		want, got = streamErr(ctx, bare), streamErr(ctx, with)
		if _, ok := got.(interface{ GRPCStatus() *status.Status }); !ok || status.Code(got) != status.Code(want) {
			t.Fatalf("stream, ctx %v: err = %T %v (status.Code %v); without the interceptor %v (status.Code %v)",
				ctx.Err(), got, got, status.Code(got), want, status.Code(want))
		}
	}
	if s.Calls(methodUnary)+s.Calls(methodBidi) != 0 {
		t.Fatalf("the server saw %d calls, want none", s.Calls(methodUnary)+s.Calls(methodBidi))
	}
}

// A server's wait is jittered, as Retry-After is in retryhttp: each retry
// waits the pushback plus up to 10 % of it, drawn afresh, so clients
// pushed back together do not come back together.
func TestPushbackJittered(t *testing.T) {
	const hint = 5 * time.Millisecond
	var rec retrytest.Recorder
	p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 2, Observer: &rec} // no wait of its own: the hint's alone
	s := &echoServer{unary: withPushback(1<<30, "5")}
	cc := serve(t, s, dialOptions(t, p)...)
	for range 10 {
		callUnary(t.Context(), cc, methodUnary)
	}
	delays := rec.Waits()
	distinct := map[time.Duration]bool{}
	for _, d := range delays {
		distinct[d] = true
		if d < hint || d > hint+hint/10 {
			t.Errorf("wait %v after a pushback of %v: want %v plus up to 10 %%", d, hint, hint)
		}
	}
	if len(delays) != 10 || len(distinct) < 2 {
		t.Errorf("waits %v: want 10, jittered (not all alike)", delays)
	}
}
