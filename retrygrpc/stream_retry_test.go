package retrygrpc_test

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/fleetseam"
	"github.com/retrykit/retry/retrytest"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestStreamGivesUp(t *testing.T) {
	always := func(n int, stream grpc.ServerStream) error {
		return status.Error(codes.Unavailable, "down")
	}
	p := fast
	p.MaxAttempts = 3
	s := &echoServer{bidi: always}
	cc := serve(t, s, grpc.WithChainStreamInterceptor(
		streamInterceptor(t, p), // outer: must not multiply
		streamInterceptor(t, p),
	))
	cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	sendAll(t, cs, "a")
	_, err = recvAll(cs)
	var re *retry.Error
	if !errors.As(err, &re) || status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v, want *retry.Error with Unavailable", err)
	}
	if n := s.Calls(methodBidi); n != 3 {
		t.Fatalf("server saw %d attempts, want 3 (one layer)", n)
	}
}

// Opening the stream fails (nothing listens): NewStream retries and gives
// up with the last status.
func TestStreamOpenFails(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	p := fast
	p.MaxAttempts = 3
	cc, err := grpc.NewClient(addr, append(dialOptions(t, p), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_, err = cc.NewStream(t.Context(), bidiDesc, methodBidi)
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 3 || status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v, want *retry.Error after 3 attempts with Unavailable", err)
	}
}

// grpc-previous-rpc-attempts counts the attempts sent to the server, not
// those the Throttle rejected, on streams as on unary calls. The server
// makes the Throttle reject everything after its first failure (through
// the fleet counts, which make the rejection probability exactly 1), and
// the Observer lets attempts through again after two rejections; the
// attempts sent then fail once more and succeed.
func TestPreviousAttemptsSkipThrottled(t *testing.T) {
	setup := func() (retry.Policy, *retry.Throttle) {
		th, err := retry.NewThrottle(retry.ThrottleConfig{})
		if err != nil {
			t.Fatal(err)
		}
		p := fast
		p.MaxAttempts = 6
		p.Throttle = th
		rejected := 0
		p.Observer = retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			if e.Kind == retry.EventRetry && errors.Is(e.Err, retry.ErrThrottled) {
				if rejected++; rejected == 2 {
					th.Override(retry.ThrottleAllowAll) // probability 0
				}
			}
		})
		return p, th
	}
	rejectAll := func(th *retry.Throttle) { th.Override(retry.ThrottleRejectAll) }
	want := []string{"", "1", "2"}

	p, th := setup()
	su := &echoServer{unary: func(_ context.Context, n int, in string) (string, error) {
		if n == 1 {
			rejectAll(th)
		}
		if n <= 2 {
			return "", status.Error(codes.Unavailable, "down")
		}
		return in, nil
	}}
	ccu := serve(t, su, dialOptions(t, p)...)
	if _, err := callUnary(t.Context(), ccu, methodUnary); err != nil {
		t.Fatal(err)
	}
	if got := su.Previous(); !slices.Equal(got, want) {
		t.Fatalf("unary: the attempts sent carried grpc-previous-rpc-attempts %q, want %q", got, want)
	}

	p, th = setup()
	ss := &echoServer{bidi: func(n int, st grpc.ServerStream) error {
		if n == 1 {
			rejectAll(th)
		}
		if n <= 2 {
			return status.Error(codes.Unavailable, "down")
		}
		return echoAll(st)
	}}
	ccs := serve(t, ss, dialOptions(t, p)...)
	cs, err := ccs.NewStream(t.Context(), bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	sendAll(t, cs, "a")
	if got, err := recvAll(cs); err != nil || !slices.Equal(got, []string{"a"}) {
		t.Fatalf("stream: got %q, %v", got, err)
	}
	if got := ss.Previous(); !slices.Equal(got, want) {
		t.Fatalf("stream: the attempts sent carried grpc-previous-rpc-attempts %q, want %q", got, want)
	}
}

// A lookup service (each request answered as it is read, with a larger
// record) whose first attempt failed before answering, after the client
// had sent 200 kB (under the 256 KiB replay buffer), over 64 KiB windows.
// Promise: a retry sends the messages again in order and the application
// sees the stream as if it had not failed. The replay therefore runs while
// RecvMsg reads the responses: a replay that nothing reads alongside
// blocks on flow control, and so does the server, until the context ends.
func TestStreamReplayWhileReceiving(t *testing.T) {
	const msgs, size = 20, 10000
	for _, failFirst := range []bool{false, true} {
		s := &echoServer{bidi: func(n int, st grpc.ServerStream) error {
			if n == 1 && failFirst {
				for range msgs {
					if err := st.RecvMsg(new(wrapperspb.StringValue)); err != nil {
						return err
					}
				}
				return status.Error(codes.Unavailable, "restarting")
			}
			for { // answer each request as it is read, with a 50 kB record
				in := new(wrapperspb.StringValue)
				if err := st.RecvMsg(in); err != nil {
					return nil
				}
				if err := st.SendMsg(wrapperspb.String(in.GetValue()[:1] + strings.Repeat("r", 5*size))); err != nil {
					return err
				}
			}
		}}
		cc := serveWindows(t, s, dialOptions(t, fast)...)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		cs, err := cc.NewStream(ctx, bidiDesc, methodBidi)
		if err != nil {
			t.Fatal(err)
		}
		sent := make(chan error, 1)
		go func() {
			for i := range msgs {
				if err := cs.SendMsg(wrapperspb.String(string(rune('a'+i)) + strings.Repeat("x", size))); err != nil {
					sent <- err
					return
				}
			}
			sent <- cs.CloseSend()
		}()
		start := time.Now()
		got, err := recvAll(cs)
		serr := <-sent
		cancel()
		if err != nil || len(got) != msgs {
			t.Fatalf("first attempt fails: %v; after %v: received %d of %d answers, RecvMsg = %v, sender = %v; want all %d answers (attempts: %d)",
				failFirst, time.Since(start).Round(time.Millisecond), len(got), msgs, err, serr, msgs, s.Calls(methodBidi))
		}
		for i, g := range got {
			if g[0] != byte('a'+i) {
				t.Fatalf("first attempt fails: %v: answer %d is for request %q, want %q: out of order", failFirst, i, g[:1], string(rune('a'+i)))
			}
		}
	}
}

// While a retry replays the buffer into an attempt that is not reading
// (flow control holds the replay), the stream's other methods do not
// wait for it: Context returns at once. Promise: a retry happens inside
// RecvMsg, and no lock is held across network sends.
func TestStreamReplayHoldsNoLock(t *testing.T) {
	const msgs, size = 20, 10000
	started, release := make(chan struct{}), make(chan struct{})
	s := &echoServer{bidi: func(n int, st grpc.ServerStream) error {
		if n == 1 {
			for range msgs {
				if err := st.RecvMsg(new(wrapperspb.StringValue)); err != nil {
					return err
				}
			}
			return status.Error(codes.Unavailable, "restarting")
		}
		if err := st.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			return err
		}
		close(started)
		<-release // read nothing more for now: the replay blocks on flow control
		if err := st.SendMsg(wrapperspb.String("ok")); err != nil {
			return err
		}
		return listenOnly(n, st)
	}}
	cc := serveWindows(t, s, dialOptions(t, fast)...)
	cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	for range msgs {
		if err := cs.SendMsg(wrapperspb.String(strings.Repeat("x", size))); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	recvd := make(chan error, 1)
	go func() {
		got, err := recvAll(cs)
		if err == nil && !slices.Equal(got, []string{"ok"}) {
			err = errors.New("got " + strings.Join(got, ","))
		}
		recvd <- err
	}()
	select {
	case <-started: // attempt 2 runs; the replay is under way
	case <-time.After(10 * time.Second):
		t.Fatal("no retry started")
	}
	ctxDone := make(chan struct{})
	go func() { cs.Context(); close(ctxDone) }()
	select {
	case <-ctxDone:
	case <-time.After(2 * time.Second):
		close(release)
		<-ctxDone
		t.Fatal("Context() blocked while a replay was held up by flow control")
	}
	close(release)
	if err := <-recvd; err != nil {
		t.Fatal(err)
	}
}

// A replay that fails part-way (attempt 2 reads two of the twenty
// messages and fails, with more than a window still to send): that
// attempt fails as any other, the retry follows the usual rules, and
// attempt 3 receives every message once, in order.
func TestStreamReplayFailsMidway(t *testing.T) {
	const msgs, size = 20, 10000
	rec := new(recorder)
	s := &echoServer{bidi: func(n int, st grpc.ServerStream) error {
		reads := map[int]int{1: msgs, 2: 2}[n]
		for i := 0; n > 2 || i < reads; i++ {
			in := new(wrapperspb.StringValue)
			if err := st.RecvMsg(in); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
			rec.add(n, in.GetValue()[:2])
			if n > 2 {
				if err := st.SendMsg(wrapperspb.String(in.GetValue()[:2])); err != nil {
					return err
				}
			}
		}
		return status.Error(codes.Unavailable, "restarting")
	}}
	cc := serveWindows(t, s, dialOptions(t, fast)...)
	cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range msgs {
		want = append(want, strconv.Itoa(10+i))
	}
	sent := make(chan error, 1)
	go func() {
		for _, m := range want {
			if err := cs.SendMsg(wrapperspb.String(m + strings.Repeat("x", size))); err != nil {
				sent <- err
				return
			}
		}
		sent <- cs.CloseSend()
	}()
	got, err := recvAll(cs)
	if serr := <-sent; serr != nil || err != nil {
		t.Fatalf("sender: %v, RecvMsg: %v", serr, err)
	}
	if !slices.Equal(got, want) || !slices.Equal(rec.get(3), want) || s.Calls(methodBidi) != 3 {
		t.Fatalf("after %d attempts: client got %q, attempt 3 received %q; want %q for both after 3",
			s.Calls(methodBidi), got, rec.get(3), want)
	}
}

// ownDoneCtx is a context.Context implementation of its own (as some
// frameworks have): its Done channel is not a standard cancelCtx's, so
// context.WithCancel under it watches it with a goroutine until the child
// is cancelled or the parent ends. A child that is never cancelled shows
// as a goroutine that goleak finds.
type ownDoneCtx struct {
	context.Context
	done chan struct{}
}

func (c ownDoneCtx) Done() <-chan struct{} { return c.done }

func (c ownDoneCtx) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}

// clientStreamDesc describes the test service's Bidi method as a
// client-streaming one: the client reads a single response.
var clientStreamDesc = &grpc.StreamDesc{StreamName: "Bidi", ClientStreams: true}

// A retried client-streaming call that ends as grpc-go documents
// (CloseAndRecv: CloseSend, then the one RecvMsg that returns the
// response), under a caller's context that is never cancelled. Promise
// (StreamClientInterceptor): a retry's context is cancelled when the
// stream ends, here when RecvMsg returns the one response of a stream
// without server streaming; otherwise it stays registered on the caller's
// context (with a context type of the caller's own, a goroutine leaks).
func TestStreamRetryContextEndsAfterCloseAndRecv(t *testing.T) {
	s := &echoServer{bidi: func(n int, st grpc.ServerStream) error {
		if err := listenOnly(n, st); err != nil {
			return err
		}
		if firstAttempt(st) {
			return status.Error(codes.Unavailable, "restarting")
		}
		return st.SendMsg(wrapperspb.String("done"))
	}}
	cc := serve(t, s, dialOptions(t, fast)...)
	warm(t, cc)
	ignore := goleak.IgnoreCurrent()
	before := s.Calls(methodBidi)

	parent := ownDoneCtx{Context: context.Background(), done: make(chan struct{})}
	defer close(parent.done)
	cs, err := cc.NewStream(parent, clientStreamDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(wrapperspb.String("a")); err != nil {
		t.Fatal(err)
	}
	// CloseAndRecv, as generated code does it.
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	out := new(wrapperspb.StringValue)
	if err := cs.RecvMsg(out); err != nil || out.GetValue() != "done" {
		t.Fatalf("RecvMsg = %q, %v; want the response of attempt 2", out.GetValue(), err)
	}
	if n := s.Calls(methodBidi) - before; n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
	if err := goleak.Find(ignore); err != nil {
		t.Fatalf("the client-streaming call ended (CloseAndRecv returned its response), but goroutines remain:\n%v", err)
	}
}

// The same when a retried stream ends the other way grpc-go documents
// besides RecvMsg errors: SendMsg fails with an error other than io.EOF
// (a message over grpc.MaxCallSendMsgSize), after the stream committed.
// Promise (StreamClientInterceptor): a retry's context is cancelled when
// SendMsg returns an error other than io.EOF.
func TestStreamRetryContextEndsAfterSendError(t *testing.T) {
	s := &echoServer{bidi: func(n int, st grpc.ServerStream) error {
		if firstAttempt(st) {
			st.RecvMsg(new(wrapperspb.StringValue))
			return status.Error(codes.Unavailable, "restarting")
		}
		return echoAll(st)
	}}
	cc := serve(t, s, dialOptions(t, fast)...)
	warm(t, cc)
	ignore := goleak.IgnoreCurrent()

	parent := ownDoneCtx{Context: context.Background(), done: make(chan struct{})}
	defer close(parent.done)
	cs, err := cc.NewStream(parent, bidiDesc, methodBidi, grpc.MaxCallSendMsgSize(50))
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(wrapperspb.String("a")); err != nil {
		t.Fatal(err)
	}
	out := new(wrapperspb.StringValue)
	if err := cs.RecvMsg(out); err != nil || out.GetValue() != "a" {
		t.Fatalf("RecvMsg = %q, %v; want attempt 2's echo", out.GetValue(), err)
	}
	if err := cs.SendMsg(wrapperspb.String(strings.Repeat("x", 100))); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("SendMsg(too large) = %v, want grpc-go's RESOURCE_EXHAUSTED", err)
	}
	if err := goleak.Find(ignore); err != nil {
		t.Fatalf("SendMsg failed on the client (grpc-go ended the stream), but goroutines remain:\n%v", err)
	}
}

// With MaxElapsed, a stream's Elapsed (in the Observer's events and in the
// *retry.Error) counts from the stream's start, as retry.Do counts from
// before its first attempt: the first attempt's time is in it.
func TestStreamElapsedFromStartWithMaxElapsed(t *testing.T) {
	const first = 200 * time.Millisecond
	for _, okAfter := range []int{2, 0} { // succeeds at the second attempt; never
		var rec retrytest.Recorder
		p := retry.Policy{Initial: time.Millisecond, Multiplier: 1, MaxDelay: time.Millisecond, Jitter: retry.NoJitter(),
			MaxAttempts: 3, MaxElapsed: 10 * time.Second, Observer: &rec}
		s := &echoServer{bidi: func(n int, st grpc.ServerStream) error {
			if n == 1 {
				time.Sleep(first)
			}
			if n != okAfter {
				return status.Error(codes.Unavailable, "down")
			}
			return echoAll(st)
		}}
		cc := serve(t, s, grpc.WithStreamInterceptor(streamInterceptor(t, p)), grpc.WithDisableRetry())
		cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
		if err != nil {
			t.Fatal(err)
		}
		cs.SendMsg(wrapperspb.String("a"))
		cs.CloseSend()
		_, err = recvAll(cs)
		var retries, dones []retry.Event
		for _, e := range rec.Events() {
			switch e.Kind {
			case retry.EventRetry:
				retries = append(retries, e)
			case retry.EventDone:
				dones = append(dones, e)
			}
		}
		if len(retries) == 0 || retries[0].Elapsed < first {
			t.Errorf("okAfter %d: first EventRetry %+v: want an Elapsed with the first attempt's %v", okAfter, retries, first)
		}
		if okAfter == 0 {
			var re *retry.Error
			if !errors.As(err, &re) || re.Elapsed < first || len(dones) != 1 || dones[0].Elapsed != re.Elapsed {
				t.Errorf("gave up with %v (Elapsed %v), EventDone %+v: want one Elapsed, with the first attempt's %v", err, re, dones, first)
			}
		}
	}
}

// A stream is one retry loop from NewStream on: a retry in RecvMsg after
// one in NewStream continues it (attempts numbered on, the Budget counting
// the stream's first attempt once), and the Observer hears every stream,
// one that never failed included: EventAttempt as each attempt begins and
// one EventDone when its outcome is known. Opening fails once (an
// interceptor below the retrying one), then the server fails the first
// stream it sees.
func TestStreamOneLoop(t *testing.T) {
	for _, tc := range []struct {
		name         string
		openFails    bool
		serverFails  bool
		want         []string // the kinds of the Observer's events
		firstRetries [2]int64 // the Budget's counts: first attempts, retries
	}{
		{"no failure", false, false, []string{"attempt", "done"}, [2]int64{1, 0}},
		{"recv", false, true, []string{"attempt", "retry", "attempt", "done"}, [2]int64{1, 1}},
		{"open then recv", true, true, []string{"attempt", "retry", "attempt", "retry", "attempt", "done"}, [2]int64{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := retry.NewBudget(retry.BudgetConfig{})
			if err != nil {
				t.Fatal(err)
			}
			var ev retrytest.Recorder
			p := fast
			p.Budget, p.Observer = b, &ev
			var opens sync.Mutex
			opened := 0
			failOpen := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				opens.Lock()
				opened++
				n := opened
				opens.Unlock()
				if tc.openFails && n == 1 {
					return nil, status.Error(codes.Unavailable, "not opened")
				}
				return streamer(ctx, desc, cc, method, opts...)
			}
			s := &echoServer{bidi: func(n int, st grpc.ServerStream) error {
				if tc.serverFails && n == 1 {
					return status.Error(codes.Unavailable, "down")
				}
				return echoAll(st)
			}}
			cc := serve(t, s, append(dialOptions(t, p), grpc.WithChainStreamInterceptor(failOpen))...)
			streamEcho(t, t.Context(), cc)
			attempts := (len(tc.want) + 1) / 2
			if kinds, done := kindsAndDone(&ev); !slices.Equal(kinds, tc.want) || len(done) != 1 || done[0] != attempts {
				t.Errorf("Observer told %v (EventDone attempts %v), want %v (EventDone attempt %d)", kinds, done, tc.want, attempts)
			}
			if first, retries := fleetseam.BudgetOf[*retry.Budget]().LocalCounts(b); first != tc.firstRetries[0] || retries != tc.firstRetries[1] {
				t.Errorf("Budget counted %d first attempts and %d retries, want %d and %d", first, retries, tc.firstRetries[0], tc.firstRetries[1])
			}
		})
	}
}
