package retrygrpc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// kindsAndDone returns the kinds of the events r recorded, and the attempt
// of each EventDone.
func kindsAndDone(r *retrytest.Recorder) (kinds []string, done []int) {
	for _, e := range r.Events() {
		kinds = append(kinds, e.Kind.String())
		if e.Kind == retry.EventDone {
			done = append(done, e.Attempt)
		}
	}
	return kinds, done
}

// alwaysUnavailable is a server that answers every unary call and every
// stream with UNAVAILABLE.
func alwaysUnavailable() *echoServer {
	return &echoServer{
		unary: func(context.Context, int, string) (string, error) { return "", status.Error(codes.Unavailable, "down") },
		bidi:  func(int, grpc.ServerStream) error { return status.Error(codes.Unavailable, "down") },
	}
}

// callOrStream makes one unary call, or opens a bidi stream, sends a
// message and reads it to the end; it returns the error.
func callOrStream(ctx context.Context, cc *grpc.ClientConn, stream bool) error {
	if !stream {
		_, err := callUnary(ctx, cc, methodUnary)
		return err
	}
	cs, err := cc.NewStream(ctx, bidiDesc, methodBidi)
	if err != nil {
		return err
	}
	if err := cs.SendMsg(wrapperspb.String("a")); err != nil {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	_, err = recvAll(cs)
	return err
}

// checkEndedByContext checks the error of a call that the caller's
// context (cancelled) ended after attempts attempts that the server
// answered with UNAVAILABLE: as grpc-go's own retry, status CANCELLED;
// errors.Is(err, context.Canceled); and the *retry.Error that tells
// enclosing layers a loop gave up, whose Err keeps the last status.
func checkEndedByContext(t *testing.T, err error, attempts int) {
	t.Helper()
	if !errors.Is(err, context.Canceled) || status.Code(err) != codes.Canceled {
		t.Fatalf("err = %v (status.Code %v): want one matching context.Canceled, with status CANCELLED", err, status.Code(err))
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Reason != retry.ReasonContext || re.Attempts != attempts || status.Code(re.Err) != codes.Unavailable {
		t.Fatalf("err = %v: want a *retry.Error of %d attempts, ReasonContext, last status UNAVAILABLE", err, attempts)
	}
	if !retry.IsExhausted(err) {
		t.Fatalf("err = %v: want it marked as given up on", err)
	}
}

// Issue 24, item 5: a cancel during the first wait, as during the second,
// ends the call with an error that matches the context's, with the status
// grpc-go's own retry gives (CANCELLED), for unary calls (with a plain
// policy, whose first attempt the interceptor makes itself, and with an
// Observer) and streams. The fake clock puts the cancel in the wait: the
// first lasts 1..2 s, the second 2..3 s, starting at 1..2 s.
func TestCancelDuringWaitEndsWithContext(t *testing.T) {
	for _, stream := range []bool{false, true} {
		for _, observed := range []bool{false, true} {
			for _, tc := range []struct {
				after    time.Duration
				attempts int
			}{{500 * time.Millisecond, 1}, {2500 * time.Millisecond, 2}} {
				name := fmt.Sprintf("stream=%v/observer=%v/attempts=%d", stream, observed, tc.attempts)
				t.Run(name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						var ev retrytest.Recorder
						p := retry.Policy{Initial: time.Second, MaxAttempts: 5}
						if observed {
							p.Observer = &ev
						}
						s := alwaysUnavailable()
						cc := serveInBubble(t, s, dialOptions(t, p)...)
						ctx, cancel := context.WithCancel(t.Context())
						defer cancel()
						time.AfterFunc(tc.after, cancel)
						err := callOrStream(ctx, cc, stream)
						checkEndedByContext(t, err, tc.attempts)
						method := methodUnary
						if stream {
							method = methodBidi
						}
						if got := s.Calls(method); got != tc.attempts {
							t.Fatalf("server saw %d attempts, want %d", got, tc.attempts)
						}
						if kinds, done := kindsAndDone(&ev); observed && (len(done) != 1 || done[0] != tc.attempts || kinds[len(kinds)-2] != "retry") {
							t.Fatalf("Observer told %v (EventDone attempts %v): want a retry, then done at attempt %d", kinds, done, tc.attempts)
						}
					})
				})
			}
		}
	}
}

// countdown is a context that cancels itself at the n-th call of its Err
// method, so that a test can end a call at every point at which the
// interceptors, retry.Do or grpc-go look at the context.
type countdown struct {
	context.Context
	cancel context.CancelFunc
	n      int64
	calls  atomic.Int64
}

func newCountdown(parent context.Context, n int64) *countdown {
	ctx, cancel := context.WithCancel(parent)
	return &countdown{Context: ctx, cancel: cancel, n: n}
}

func (c *countdown) Err() error {
	if c.calls.Add(1) == c.n {
		c.cancel()
	}
	return c.Context.Err()
}

// Issue 24, item 6: a context that ends at any of the calls of its Err
// method, in particular between the interceptor's own look and retry.Do's,
// never gives "gave up after 0 attempts" (status UNKNOWN) for a call whose
// attempt the server answered, nor an Observer's EventDone of attempt 0
// after an attempt; and the call always ends as its context says, with
// the status grpc-go would give, CANCELLED. Unary calls with a plain
// policy (the interceptor makes the first attempt), with an Observer (the
// loop makes it), and streams (the loop starts at the first failure).
func TestContextEndingAtEveryLook(t *testing.T) {
	for _, stream := range []bool{false, true} {
		for _, observed := range []bool{false, true} {
			t.Run(fmt.Sprintf("stream=%v/observer=%v", stream, observed), func(t *testing.T) {
				var ev retrytest.Recorder
				p := retry.Policy{Initial: time.Millisecond, MaxDelay: time.Millisecond, MaxAttempts: 3}
				if observed {
					p.Observer = &ev
				}
				s := alwaysUnavailable()
				cc := serve(t, s, dialOptions(t, p)...)
				method := methodUnary
				if stream {
					method = methodBidi
				}
				ended, ranOut := 0, false // calls that the context ended; one whose attempts ran out first
				for n := int64(1); n <= 60 && !ranOut; n++ {
					before := s.Calls(method)
					ev.Reset()
					ctx := newCountdown(t.Context(), n)
					err := callOrStream(ctx, cc, stream)
					ctx.cancel()
					sent := s.Calls(method) - before
					if ctx.calls.Load() < n {
						// Never cancelled: the attempts ran out, and every
						// look at the context has been probed.
						ranOut = true
						if status.Code(err) != codes.Unavailable || !retry.IsExhausted(err) {
							t.Fatalf("n=%d: err = %v, want the last UNAVAILABLE, given up on", n, err)
						}
						continue
					}
					ended++
					if status.Code(err) != codes.Canceled {
						t.Fatalf("n=%d: err = %v (status.Code %v), want CANCELLED; the server saw %d attempts", n, err, status.Code(err), sent)
					}
					var re *retry.Error
					if errors.As(err, &re) {
						if !errors.Is(err, context.Canceled) {
							t.Fatalf("n=%d: err = %v does not match context.Canceled", n, err)
						}
						if re.Attempts < sent || sent > 0 && re.Attempts == 0 {
							t.Fatalf("n=%d: err = %v after %d attempts the server saw", n, err, sent)
						}
					}
					if kinds, done := kindsAndDone(&ev); observed {
						attempts := 0
						for _, k := range kinds {
							if k == "attempt" {
								attempts++
							}
						}
						if attempts > 0 && (len(done) != 1 || done[0] != attempts) || attempts == 0 && len(done) > 0 && sent > 0 {
							t.Fatalf("n=%d: Observer told %v (EventDone attempts %v) for a call the server saw %d times", n, kinds, done, sent)
						}
					}
				}
				if !ranOut || ended < 4 {
					t.Fatalf("%d calls ended by their context, attempts ran out: %v; want every look probed", ended, ranOut)
				}
			})
		}
	}
}

// Issue 24, item 7: a trailer with several grpc-retry-pushback-ms values
// is not retried, as grpc-go does not retry it, whatever the values, and
// the error tells enclosing layers not to retry it either; on unary calls
// and streams.
func TestSeveralPushbackValuesNotRetried(t *testing.T) {
	for _, vals := range [][]string{{"10", "-1"}, {"10", "10"}, {"-1", "10"}} {
		md := metadata.MD{"grpc-retry-pushback-ms": vals}
		s := &echoServer{
			unary: func(ctx context.Context, _ int, _ string) (string, error) {
				grpc.SetTrailer(ctx, md)
				return "", status.Error(codes.Unavailable, "pushed back")
			},
			bidi: func(_ int, st grpc.ServerStream) error {
				st.SetTrailer(md)
				return status.Error(codes.Unavailable, "pushed back")
			},
		}
		cc := serve(t, s, dialOptions(t, fast)...)
		for _, stream := range []bool{false, true} {
			err := callOrStream(t.Context(), cc, stream)
			method := methodUnary
			if stream {
				method = methodBidi
			}
			if got := s.Calls(method); got != 1 {
				t.Fatalf("pushback %q, stream=%v: server saw %d attempts, want 1", vals, stream, got)
			}
			if status.Code(err) != codes.Unavailable || !retry.IsExhausted(err) {
				t.Fatalf("pushback %q, stream=%v: err = %v, want Unavailable marked as given up on", vals, stream, err)
			}
		}
	}
}

// Item 5 where a stream fails to open (NewStream: no server listens) and a
// unary call fails before any response: the context that ends in the first
// wait (the Observer cancels as the loop announces the retry) gives
// NewStream's error, and the call's, the context's end.
func TestCancelDuringWaitWhenNoServer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens there now
	for _, stream := range []bool{false, true} {
		ctx, cancel := context.WithCancel(t.Context())
		p := retry.Policy{Initial: 10 * time.Second, MaxAttempts: 3, Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			if e.Kind == retry.EventRetry {
				cancel()
			}
		})}
		cc, err := grpc.NewClient(addr, append(dialOptions(t, p), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		if stream {
			_, err = cc.NewStream(ctx, bidiDesc, methodBidi)
		} else {
			_, err = callUnary(ctx, cc, methodUnary)
		}
		cc.Close()
		cancel()
		checkEndedByContext(t, err, 1)
	}
}

// Item 5 with a deadline: the caller's deadline passes after an attempt
// that failed with UNAVAILABLE (an interceptor below the retrying one
// holds the answer until then), before the wait. The call ends with the
// context's end, as grpc-go's own retry reports it: DEADLINE_EXCEEDED,
// matching context.DeadlineExceeded; with a plain policy and with an
// Observer.
func TestDeadlineAfterRetriedFailure(t *testing.T) {
	for _, observed := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			p := retry.Policy{Initial: time.Second, MaxAttempts: 3}
			if observed {
				p.Observer = &retrytest.Recorder{}
			}
			hold := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				err := invoker(ctx, method, req, reply, cc, opts...)
				<-ctx.Done() // the answer is in; the deadline passes
				return err
			})
			cc := serveInBubble(t, alwaysUnavailable(), append(dialOptions(t, p), hold)...)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			_, err := callUnary(ctx, cc, methodUnary)
			var re *retry.Error
			if !errors.Is(err, context.DeadlineExceeded) || status.Code(err) != codes.DeadlineExceeded ||
				!errors.As(err, &re) || re.Attempts != 1 || status.Code(re.Err) != codes.Unavailable {
				t.Fatalf("observer=%v: err = %v (status.Code %v): want DEADLINE_EXCEEDED, matching context.DeadlineExceeded, after 1 attempt answered UNAVAILABLE", observed, err, status.Code(err))
			}
		})
	}
}
