package retrygrpc_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/fleetseam"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestStreamCodeNotRetried(t *testing.T) {
	rec := new(recorder)
	s := &echoServer{bidi: failAfterReading(rec, 1, 0, false, codes.InvalidArgument)}
	cc := serve(t, s, dialOptions(t, fast)...)
	cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	sendAll(t, cs, "a")
	if _, err := recvAll(cs); status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != "scripted" {
		t.Fatalf("err = %v, want the InvalidArgument unchanged", err)
	}
	if n := s.Calls(methodBidi); n != 1 {
		t.Fatalf("server saw %d attempts, want 1", n)
	}
}

// Streams that succeed count as first attempts for the Budget: they earn
// the retries of a stream that fails later.
func TestStreamBudgetCountsSuccesses(t *testing.T) {
	for _, tc := range []struct {
		successes int
		calls     int // attempts of the failing stream
	}{
		{0, 2}, // its own first attempt earns one retry
		{3, 5}, // four first attempts: four retries, all MaxAttempts allow
	} {
		b, err := retry.NewBudget(retry.BudgetConfig{Ratio: 1, MinPerSecond: -1, Window: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		p := fast
		p.MaxAttempts = 5
		p.Budget = b
		fail := false
		var mu sync.Mutex
		s := &echoServer{bidi: func(n int, stream grpc.ServerStream) error {
			mu.Lock()
			defer mu.Unlock()
			if fail {
				return status.Error(codes.Unavailable, "down")
			}
			return echoAll(stream)
		}}
		cc := serve(t, s, dialOptions(t, p)...)
		for range tc.successes {
			streamEcho(t, t.Context(), cc)
		}
		mu.Lock()
		fail = true
		mu.Unlock()
		cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
		if err != nil {
			t.Fatal(err)
		}
		sendAll(t, cs, "a")
		recvAll(cs)
		if got := s.Calls(methodBidi) - tc.successes; got != tc.calls {
			t.Fatalf("after %d successful streams: the failing stream made %d attempts, want %d", tc.successes, got, tc.calls)
		}
	}
}

// Server hints apply to streams too: a negative pushback stops at once, a
// RetryInfo sets the wait.
func TestStreamServerHints(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fail    func(grpc.ServerStream) error
		calls   int
		minWait time.Duration
	}{
		{"pushback -1", func(st grpc.ServerStream) error {
			st.SetTrailer(metadata.Pairs("grpc-retry-pushback-ms", "-1"))
			return status.Error(codes.Unavailable, "go away")
		}, 1, 0},
		{"pushback 150", func(st grpc.ServerStream) error {
			st.SetTrailer(metadata.Pairs("grpc-retry-pushback-ms", "150"))
			return status.Error(codes.Unavailable, "later")
		}, 2, 150 * time.Millisecond},
		{"RetryInfo 150ms", func(grpc.ServerStream) error {
			return withRetryInfo(codes.ResourceExhausted, 150*time.Millisecond)
		}, 2, 150 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &echoServer{bidi: func(n int, st grpc.ServerStream) error {
				if n == 1 {
					return tc.fail(st)
				}
				return echoAll(st)
			}}
			cc := serve(t, s, dialOptions(t, fast)...)
			start := time.Now()
			cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
			if err != nil {
				t.Fatal(err)
			}
			sendAll(t, cs, "a")
			got, err := recvAll(cs)
			took := time.Since(start)
			if n := s.Calls(methodBidi); n != tc.calls {
				t.Fatalf("server saw %d attempts, want %d (err %v)", n, tc.calls, err)
			}
			if tc.calls == 2 && (err != nil || !slices.Equal(got, []string{"a"}) || took < tc.minWait || took > tc.minWait+300*time.Millisecond) {
				t.Fatalf("got %q, %v after %v; want [a] after about %v", got, err, took, tc.minWait)
			}
			if tc.calls == 1 && status.Code(err) != codes.Unavailable {
				t.Fatalf("err = %v, want Unavailable", err)
			}
		})
	}
}

// ThrottleConfig.Accepted decides what counts as accepted for streams as
// for unary calls (retry.Do's rule): with a rule that accepts everything,
// 20 UNAVAILABLE answers leave the rejection probability at 0.
func TestThrottleAcceptedRule(t *testing.T) {
	all := func(error) bool { return true }
	var got []error
	var mu sync.Mutex
	seen := func(err error) bool {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, err)
		return true
	}
	for _, kind := range []string{"unary", "stream"} {
		t.Run(kind, func(t *testing.T) {
			for _, accepted := range []func(error) bool{all, seen} {
				th, err := retry.NewThrottle(retry.ThrottleConfig{Accepted: accepted})
				if err != nil {
					t.Fatal(err)
				}
				p := fast
				p.MaxAttempts = 1
				p.Throttle = th
				s := &echoServer{
					unary: failFirst(1000, status.Error(codes.Unavailable, "down")),
					bidi: func(int, grpc.ServerStream) error {
						return status.Error(codes.Unavailable, "down")
					},
				}
				cc := serve(t, s, dialOptions(t, p)...)
				for range 20 {
					if kind == "unary" {
						callUnary(t.Context(), cc, methodUnary)
						continue
					}
					cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
					if err != nil {
						t.Fatalf("NewStream: %v (rejection probability %v)", err, th.Probability())
					}
					sendAll(t, cs, "a")
					recvAll(cs)
				}
				if pr := th.Probability(); pr != 0 {
					t.Fatalf("rejection probability %v after 20 UNAVAILABLE that Accepted accepted, want 0", pr)
				}
			}
			// The rule sees each attempt's error, and status.Code reads it.
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 20 || status.Code(got[0]) != codes.Unavailable || status.Code(got[19]) != codes.Unavailable {
				t.Fatalf("Accepted saw %d errors %v, want 20 UNAVAILABLE", len(got), got)
			}
			got = nil
		})
	}
}

// A Throttle rejects an attempt of a stream: the Observer hears of it as
// retry.Do reports it (EventThrottled, and no EventAttempt for an attempt
// that was not sent), and the Budget counts it as retry.Do does, exactly
// as for a unary call. Promise: "the Throttle is asked before each attempt
// … the Observer apply" as in retry.Do's loop. Both the first attempt and
// a retry are rejected in turn.
func TestStreamThrottledAttemptReportedAsUnary(t *testing.T) {
	type outcome struct {
		events         []string
		first, retries int64
	}
	run := func(stream, rejectFirst bool) outcome {
		th, err := retry.NewThrottle(retry.ThrottleConfig{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := retry.NewBudget(retry.BudgetConfig{})
		if err != nil {
			t.Fatal(err)
		}
		var (
			mu     sync.Mutex
			events []string
		)
		p := fast
		p.Throttle, p.Budget = th, b
		p.Observer = retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			mu.Lock()
			defer mu.Unlock()
			name := e.Kind.String()
			if e.Err != nil && errors.Is(e.Err, retry.ErrThrottled) && e.Kind != retry.EventDone {
				name += "(throttled)"
				th.Override(retry.ThrottleAllowAll) // let the next attempt through
			}
			if e.Waited > 0 {
				name += "+waited" // after a wait: Waited carried over as retry.Do does
			}
			events = append(events, name)
		})
		fail := func(n int) bool {
			if n == 1 && !rejectFirst {
				th.Override(retry.ThrottleRejectAll) // reject the next attempt
				return true
			}
			return false
		}
		s := &echoServer{
			unary: func(_ context.Context, n int, in string) (string, error) {
				if fail(n) {
					return "", status.Error(codes.Unavailable, "down")
				}
				return in, nil
			},
			bidi: func(n int, st grpc.ServerStream) error {
				if fail(n) {
					return status.Error(codes.Unavailable, "down")
				}
				return echoAll(st)
			},
		}
		cc := serve(t, s, dialOptions(t, p)...)
		if rejectFirst {
			th.Override(retry.ThrottleRejectAll)
		}
		callEcho(t, t.Context(), cc, stream)
		mu.Lock()
		defer mu.Unlock()
		first, retries := fleetseam.BudgetOf[*retry.Budget]().LocalCounts(b)
		return outcome{slices.Clone(events), first, retries}
	}
	for _, rejectFirst := range []bool{false, true} {
		unary, stream := run(false, rejectFirst), run(true, rejectFirst)
		if !slices.Equal(unary.events, stream.events) || unary.first != stream.first || unary.retries != stream.retries {
			t.Fatalf("first attempt rejected: %v: Observer events and Budget counts (first attempts, retries):\n unary  %v %d %d\n stream %v %d %d\nwant the stream's to be retry.Do's, as the unary call's",
				rejectFirst, unary.events, unary.first, unary.retries, stream.events, stream.first, stream.retries)
		}
	}
}

// retry.Do counts every first attempt for the Budget, whatever its
// outcome, and so must streams (promise: Budget … apply as in retry.Do).
// Budget: 0.5 retries per first attempt, no floor. Call 1 fails with a
// code that is not retried (NOT_FOUND); call 2 fails once with
// UNAVAILABLE: two first attempts earn its one retry.
func TestStreamBudgetCountsFailedFirstAttempts(t *testing.T) {
	for _, stream := range []bool{false, true} {
		b, err := retry.NewBudget(retry.BudgetConfig{Ratio: 0.5, MinPerSecond: -1, Window: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		p := fast
		p.Budget = b
		script := func(n int) error {
			switch n {
			case 1:
				return status.Error(codes.NotFound, "no such thing")
			case 2:
				return status.Error(codes.Unavailable, "down")
			}
			return nil
		}
		s := &echoServer{
			unary: func(_ context.Context, n int, in string) (string, error) { return in, script(n) },
			bidi: func(n int, st grpc.ServerStream) error {
				if err := script(n); err != nil {
					return err
				}
				return echoAll(st)
			},
		}
		cc := serve(t, s, dialOptions(t, p)...)
		call := func() error {
			if !stream {
				_, err := callUnary(t.Context(), cc, methodUnary)
				return err
			}
			cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
			if err != nil {
				return err
			}
			sendAll(t, cs, "a")
			_, err = recvAll(cs)
			return err
		}
		if err := call(); status.Code(err) != codes.NotFound {
			t.Fatalf("stream %v: call 1: %v, want NOT_FOUND", stream, err)
		}
		if err := call(); err != nil {
			t.Fatalf("stream %v: call 2: %v; want its retry granted (2 first attempts × 0.5), as retry.Do grants it", stream, err)
		}
		if first, retries := fleetseam.BudgetOf[*retry.Budget]().LocalCounts(b); first != 2 || retries != 1 {
			t.Fatalf("stream %v: Budget counted %d first attempts and %d retries, want 2 and 1", stream, first, retries)
		}
	}
}

// grpc-go's own RESOURCE_EXHAUSTED for a request over
// grpc.MaxCallSendMsgSize is raised on the client: no sign of an
// overloaded backend, on streams (SendMsg) as on unary calls. Promise: the
// Throttle is told each attempt's outcome "judged as retry.Do judges it",
// as UnaryClientInterceptor does.
func TestStreamLocalSendFailureNotOverload(t *testing.T) {
	newThrottle := func() *retry.Throttle {
		th, err := retry.NewThrottle(retry.ThrottleConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return th
	}
	const calls = 10
	big := wrapperspb.String(strings.Repeat("x", 100))

	thu := newThrottle()
	pu := fast
	pu.Throttle = thu
	ccu := serve(t, &echoServer{}, dialOptions(t, pu)...)
	for range calls {
		if err := ccu.Invoke(t.Context(), methodUnary, big, new(wrapperspb.StringValue), grpc.MaxCallSendMsgSize(50)); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("unary: %v", err)
		}
	}

	ths := newThrottle()
	ps := fast
	ps.Throttle = ths
	ccs := serve(t, &echoServer{bidi: listenOnly}, dialOptions(t, ps)...)
	for i := range calls {
		cs, err := ccs.NewStream(t.Context(), bidiDesc, methodBidi, grpc.MaxCallSendMsgSize(50))
		if err != nil {
			t.Fatalf("stream %d: NewStream = %v (rejection probability %.2f)", i+1, err, ths.Probability())
		}
		if err := cs.SendMsg(big); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("stream: SendMsg = %v", err)
		}
		cs.RecvMsg(new(wrapperspb.StringValue))
	}
	if pu, ps := thu.Probability(), ths.Probability(); pu != 0 || ps != 0 {
		t.Fatalf("requests that grpc-go refused on the client: Throttle rejection probability %.2f after %d unary calls, %.2f after the streams; want 0 (no overload)", pu, calls, ps)
	}
}

// The first attempt of a stream fails to open with an error whose server
// wait is beyond WithMaxServerWait (from a client-side limiter
// interceptor below this one; a "do not retry" answer is refused alike).
// Promise (StreamClientInterceptor): "A "do not retry" pushback, or a
// server wait beyond WithMaxServerWait, on the first failure gives a
// *retry.Error, as on unary calls, so that enclosing retry loops do not
// retry it either."
func TestStreamRefusedOpenGivesRetryError(t *testing.T) {
	refuse := withRetryInfo(codes.ResourceExhausted, 10*time.Minute) // over the 5 min default cap
	var calls sync.Map
	first := func(key string) bool { _, seen := calls.LoadOrStore(key, true); return !seen }
	limiter := []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if first("unary") {
				return refuse
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			if first("stream") {
				return nil, refuse
			}
			return streamer(ctx, desc, cc, method, opts...)
		}),
	}
	cc := serve(t, &echoServer{}, append(dialOptions(t, fast), limiter...)...)
	_, uerr := callUnary(t.Context(), cc, methodUnary)
	_, serr := cc.NewStream(t.Context(), bidiDesc, methodBidi)
	var ure, sre *retry.Error
	if !errors.As(uerr, &ure) {
		t.Fatalf("unary: %T %v, want a *retry.Error (test premise)", uerr, uerr)
	}
	if !errors.As(serr, &sre) || status.Code(serr) != codes.ResourceExhausted || sre.Attempts != 1 {
		t.Fatalf("NewStream = %T %v; want a *retry.Error of 1 attempt wrapping RESOURCE_EXHAUSTED, as the unary call's (%v)", serr, serr, uerr)
	}
}
