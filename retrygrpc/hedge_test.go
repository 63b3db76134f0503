package retrygrpc_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// attemptOf returns the attempt number a server sees: 1 + the copy's
// grpc-previous-rpc-attempts.
func attemptOf(ctx context.Context) int {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(retrygrpc.HeaderPreviousAttempts); len(v) > 0 {
		n, _ := strconv.Atoi(v[0])
		return n + 1
	}
	return 1
}

// javaShape is grpc-java's hedging example scaled down 100 times in time:
// 10 %, 5 % and 1 % of copies take 20, 50 and 100 ms (2, 5, 10 s there),
// the others 1 ms. Each copy of call in draws its own latency from a
// SHA-256 of (in, attempt): the copies of a call are independent, as the
// example's random draws are, and the run is the same every time.
func javaShape(ctx context.Context, _ int, in string) (string, error) {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d", in, attemptOf(ctx)))
	d := time.Millisecond
	switch u := binary.BigEndian.Uint64(sum[:8]) % 100; {
	case u < 1:
		d = 100 * time.Millisecond
	case u < 6:
		d = 50 * time.Millisecond
	case u < 16:
		d = 20 * time.Millisecond
	}
	select {
	case <-time.After(d):
		return in, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// tail makes calls sequential unary calls over cc and returns their
// latencies' p99 and p99.9.
func tail(t *testing.T, cc *grpc.ClientConn, calls int) (p99, p999 time.Duration) {
	t.Helper()
	lat := make([]time.Duration, calls)
	for i := range lat {
		start := time.Now()
		out := new(wrapperspb.StringValue)
		if err := cc.Invoke(t.Context(), methodUnary, wrapperspb.String(strconv.Itoa(i)), out); err != nil || out.GetValue() != strconv.Itoa(i) {
			t.Fatalf("call %d: %q, %v", i, out.GetValue(), err)
		}
		lat[i] = time.Since(start)
	}
	slices.Sort(lat)
	return lat[calls*990/1000-1], lat[calls*999/1000-1]
}

// grpc-java's example (3 attempts, hedging delay 1 s: p99 10,004 ms ->
// 2,002 ms, p99.9 10,007 ms -> 2,011 ms) reproduced at 1/100 scale in
// fake time, 2,000 calls: without hedging p99 and p99.9 are 100 ms; with
// it 20 ms and 21 ms. A call is slower than the first hedge's 11 ms only
// when its first two copies are both slow (16 % × 16 %, 2.6 % of calls):
// the third copy, sent at 20 ms, then races the first, which most often
// answers at 20 ms.
func TestUnaryHedgeJavaExample(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &echoServer{unary: javaShape}
		h, err := retry.NewHedger(retry.HedgeConfig{FixedDelay: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		p := retry.Policy{MaxAttempts: 3}
		plain := serveInBubble(t, s, grpc.WithDisableRetry())
		hedged := serveInBubble(t, s, grpc.WithChainUnaryInterceptor(unaryInterceptor(t, p, retrygrpc.WithHedging(h))), grpc.WithDisableRetry())
		b99, b999 := tail(t, plain, 2000)
		a99, a999 := tail(t, hedged, 2000)
		t.Logf("without hedging p99 %v, p99.9 %v; with hedging p99 %v, p99.9 %v", b99, b999, a99, a999)
		if b99 != 100*time.Millisecond || b999 != 100*time.Millisecond {
			t.Errorf("without hedging p99 %v, p99.9 %v; want 100ms, 100ms", b99, b999)
		}
		if a99 != 20*time.Millisecond || a999 != 21*time.Millisecond {
			t.Errorf("with hedging p99 %v, p99.9 %v; want 20ms, 21ms", a99, a999)
		}
	})
}

// Non-fatal codes send the next copy at once; a fatal code ends the call.
// Every copy after the first carries grpc-previous-rpc-attempts.
func TestUnaryHedgeCodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := retry.NewHedger(retry.HedgeConfig{FixedDelay: 10 * time.Millisecond})
		s := &echoServer{unary: func(ctx context.Context, n int, in string) (string, error) {
			switch n {
			case 1:
				<-ctx.Done() // stuck until cancelled
				return "", ctx.Err()
			case 2:
				return "", status.Error(codes.Unavailable, "try elsewhere")
			}
			time.Sleep(time.Millisecond)
			return in, nil
		}}
		cc := serveInBubble(t, s, grpc.WithChainUnaryInterceptor(unaryInterceptor(t, retry.Policy{}, retrygrpc.WithHedging(h))))
		start := time.Now()
		if _, err := callUnary(t.Context(), cc, methodUnary); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 11*time.Millisecond {
			t.Errorf("call took %v, want 11ms: copy 2 at 10ms fails, copy 3 goes at once", took)
		}
		if got := s.Previous(); !slices.Equal(got, []string{"", "1", "2"}) {
			t.Errorf("grpc-previous-rpc-attempts %q, want [\"\" 1 2]", got)
		}

		s2 := &echoServer{unary: func(ctx context.Context, n int, in string) (string, error) {
			if n == 1 {
				<-ctx.Done()
				return "", ctx.Err()
			}
			return "", status.Error(codes.InvalidArgument, "bad")
		}}
		cc2 := serveInBubble(t, s2, grpc.WithChainUnaryInterceptor(unaryInterceptor(t, retry.Policy{}, retrygrpc.WithHedging(h))))
		start = time.Now()
		_, err := callUnary(t.Context(), cc2, methodUnary)
		if status.Code(err) != codes.InvalidArgument || time.Since(start) != 10*time.Millisecond || s2.Calls(methodUnary) != 2 {
			t.Errorf("fatal code: %v after %v, %d copies; want InvalidArgument at 10ms, 2 copies", err, time.Since(start), s2.Calls(methodUnary))
		}
	})
}

// Pushback stops further hedges; methods left out by WithMethods are not
// hedged.
func TestUnaryHedgePushbackAndMethods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := retry.NewHedger(retry.HedgeConfig{FixedDelay: 10 * time.Millisecond})
		s := &echoServer{unary: func(ctx context.Context, n int, in string) (string, error) {
			switch n {
			case 1:
				time.Sleep(50 * time.Millisecond)
				return in, nil
			case 2:
				grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", "1000"))
				return "", status.Error(codes.Unavailable, "pushed back")
			}
			return in, nil
		}}
		ic := unaryInterceptor(t, retry.Policy{}, retrygrpc.WithHedging(h), retrygrpc.WithMethods(methodUnary))
		cc := serveInBubble(t, s, grpc.WithChainUnaryInterceptor(ic))
		if _, err := callUnary(t.Context(), cc, methodUnary); err != nil {
			t.Fatal(err)
		}
		if got := s.Calls(methodUnary); got != 2 {
			t.Errorf("%d copies, want 2: no hedge after the pushback", got)
		}
		if _, err := callUnary(t.Context(), cc, methodOther); err != nil || s.Calls(methodOther) != 1 {
			t.Errorf("other method: %v, %d calls; want 1, unhedged", err, s.Calls(methodOther))
		}
	})
}

// WithHedging names the hedged methods in the one retry interceptor that
// DialOptions installs: the named method is hedged, every other method
// keeps its retries (it is not called once, as a separate hedging
// interceptor limited by WithMethods left it).
func TestWithHedgingKeepsOtherMethodsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := retry.NewHedger(retry.HedgeConfig{FixedDelay: 10 * time.Millisecond})
		s := &echoServer{unary: func(ctx context.Context, n int, in string) (string, error) {
			if n == 1 {
				time.Sleep(20 * time.Millisecond)
				return "", status.Error(codes.Unavailable, "slow, then refused")
			}
			return in, nil
		}}
		p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}
		cc := serveInBubble(t, s, dialOptions(t, p, retrygrpc.WithHedging(h, methodUnary))...)
		start := time.Now()
		if _, err := callUnary(t.Context(), cc, methodUnary); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 10*time.Millisecond || s.Calls(methodUnary) != 2 {
			t.Errorf("hedged method: %v, %d attempts; want 10ms (the hedge won), 2", took, s.Calls(methodUnary))
		}
		start = time.Now()
		if _, err := callUnary(t.Context(), cc, methodOther); err != nil {
			t.Fatalf("other method: %v, want a success at its retry", err)
		}
		if took := time.Since(start); took != 20*time.Millisecond || s.Calls(methodOther) != 2 {
			t.Errorf("other method: %v, %d attempts; want 20ms (retried after the failure, not hedged), 2", took, s.Calls(methodOther))
		}
	})
}

// WithHedging(nil) is refused, where &retry.Hedger{} hedges with the
// defaults: DialOptions returns an error saying so and no options, so no
// call reaches the server with it; with &retry.Hedger{} instead, a method
// it does not name keeps its retries.
func TestWithHedgingNilHedgerIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &echoServer{unary: func(ctx context.Context, n int, in string) (string, error) {
			if n == 1 {
				return "", status.Error(codes.Unavailable, "refused once")
			}
			return in, nil
		}}
		p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}
		dopts, err := retrygrpc.DialOptions(p, retrygrpc.WithHedging(nil, methodUnary))
		if err == nil || !strings.Contains(err.Error(), "retrygrpc: WithHedging with a nil *retry.Hedger") || dopts != nil || s.Calls(methodUnary) != 0 {
			t.Errorf("named method: %v, %v after %d calls at the server; want the nil-Hedger error, no options and no call", dopts, err, s.Calls(methodUnary))
		}
		cc := serveInBubble(t, s, dialOptions(t, p, retrygrpc.WithHedging(&retry.Hedger{}, methodUnary))...)
		if _, err := callUnary(t.Context(), cc, methodOther); err != nil || s.Calls(methodOther) != 2 {
			t.Errorf("other method: %v after %d calls; want a success at its retry", err, s.Calls(methodOther))
		}
	})
}
