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
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygrpc"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

var bidiDesc = &grpc.StreamDesc{StreamName: "Bidi", ServerStreams: true, ClientStreams: true}

// recorder keeps what each attempt of the stream received.
type recorder struct {
	mu   sync.Mutex
	seen map[int][]string
}

func (r *recorder) add(n int, v string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[int][]string{}
	}
	r.seen[n] = append(r.seen[n], v)
}

func (r *recorder) get(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen[n]...)
}

// failAfterReading reads k messages on attempt 1 and fails with code
// (after sending sent messages first); later attempts echo everything.
func failAfterReading(rec *recorder, k int, sent int, withHeader bool, code codes.Code) func(int, grpc.ServerStream) error {
	return func(n int, stream grpc.ServerStream) error {
		for i := 0; n > 1 || i < k; i++ {
			in := new(wrapperspb.StringValue)
			err := stream.RecvMsg(in)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			rec.add(n, in.GetValue())
			if n > 1 {
				if err := stream.SendMsg(in); err != nil {
					return err
				}
			}
		}
		if n > 1 {
			return nil
		}
		if withHeader {
			stream.SendHeader(metadata.Pairs("x", "y"))
		}
		for i := range sent {
			stream.SendMsg(wrapperspb.String("early" + strconv.Itoa(i)))
		}
		return status.Error(code, "scripted")
	}
}

func sendAll(t *testing.T, cs grpc.ClientStream, msgs ...string) {
	t.Helper()
	for _, m := range msgs {
		if err := cs.SendMsg(wrapperspb.String(m)); err != nil {
			t.Fatalf("SendMsg(%q): %v", m, err)
		}
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
}

func recvAll(cs grpc.ClientStream) ([]string, error) {
	var got []string
	for {
		out := new(wrapperspb.StringValue)
		if err := cs.RecvMsg(out); err == io.EOF {
			return got, nil
		} else if err != nil {
			return got, err
		}
		got = append(got, out.GetValue())
	}
}

func TestStreamRetriedBeforeCommit(t *testing.T) {
	rec := new(recorder)
	s := &echoServer{bidi: failAfterReading(rec, 1, 0, false, codes.Unavailable)}
	cc := serve(t, s, retrygrpc.DialOptions(fast)...)
	cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	sendAll(t, cs, "a", "b", "c")
	got, err := recvAll(cs)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(got, want) || !slices.Equal(rec.get(2), want) {
		t.Fatalf("client got %q, attempt 2 received %q; want %q for both", got, rec.get(2), want)
	}
	if n := s.Calls(methodBidi); n != 2 {
		t.Fatalf("server saw %d attempts, want 2", n)
	}
	if got, want := s.Previous(), []string{"", "1"}; !slices.Equal(got, want) {
		t.Fatalf("grpc-previous-rpc-attempts = %q, want %q", got, want)
	}
}

func TestStreamCommittedByMessage(t *testing.T) {
	rec := new(recorder)
	s := &echoServer{bidi: failAfterReading(rec, 1, 1, false, codes.Unavailable)}
	cc := serve(t, s, retrygrpc.DialOptions(fast)...)
	cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	sendAll(t, cs, "a")
	got, err := recvAll(cs)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v, want Unavailable", err)
	}
	if !slices.Equal(got, []string{"early0"}) {
		t.Fatalf("client got %q, want the one message once", got)
	}
	if n := s.Calls(methodBidi); n != 1 {
		t.Fatalf("server saw %d attempts, want 1: a stream is not retried after a response", n)
	}
}

func TestStreamCommittedByHeader(t *testing.T) {
	rec := new(recorder)
	s := &echoServer{bidi: failAfterReading(rec, 1, 0, true, codes.Unavailable)}
	cc := serve(t, s, retrygrpc.DialOptions(fast)...)
	cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	sendAll(t, cs, "a")
	if _, err := recvAll(cs); status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v, want Unavailable", err)
	}
	if n := s.Calls(methodBidi); n != 1 {
		t.Fatalf("server saw %d attempts, want 1: headers commit the stream", n)
	}
}

func TestStreamCommittedByBuffer(t *testing.T) {
	rec := new(recorder)
	s := &echoServer{bidi: failAfterReading(rec, 2, 0, false, codes.Unavailable)}
	cc := serve(t, s, retrygrpc.DialOptions(fast, retrygrpc.WithMaxBuffer(10))...)
	cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	sendAll(t, cs, "short", strings.Repeat("x", 20)) // the second does not fit
	if _, err := recvAll(cs); status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v, want Unavailable", err)
	}
	if n := s.Calls(methodBidi); n != 1 {
		t.Fatalf("server saw %d attempts, want 1", n)
	}
}

func TestStreamCodeNotRetried(t *testing.T) {
	rec := new(recorder)
	s := &echoServer{bidi: failAfterReading(rec, 1, 0, false, codes.InvalidArgument)}
	cc := serve(t, s, retrygrpc.DialOptions(fast)...)
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

// A sender and a receiver on two goroutines while the first attempt fails
// part-way: every message arrives once, in order, on the attempt that
// succeeds.
func TestStreamConcurrentSendRecv(t *testing.T) {
	rec := new(recorder)
	s := &echoServer{bidi: failAfterReading(rec, 5, 0, false, codes.Unavailable)}
	cc := serve(t, s, retrygrpc.DialOptions(fast)...)
	cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 100 {
		want = append(want, strconv.Itoa(i))
	}
	sendErr := make(chan error, 1)
	go func() {
		for _, m := range want {
			if err := cs.SendMsg(wrapperspb.String(m)); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- cs.CloseSend()
	}()
	got, err := recvAll(cs)
	if serr := <-sendErr; serr != nil {
		t.Fatal(serr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) || !slices.Equal(rec.get(2), want) {
		t.Fatalf("client got %d messages, attempt 2 received %d; want 100 in order for both", len(got), len(rec.get(2)))
	}
}

func TestStreamGivesUp(t *testing.T) {
	always := func(n int, stream grpc.ServerStream) error {
		return status.Error(codes.Unavailable, "down")
	}
	p := fast
	p.MaxAttempts = 3
	s := &echoServer{bidi: always}
	cc := serve(t, s, grpc.WithChainStreamInterceptor(
		retrygrpc.StreamClientInterceptor(p), // outer: must not multiply
		retrygrpc.StreamClientInterceptor(p),
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
	cc, err := grpc.NewClient(addr, append(retrygrpc.DialOptions(p), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
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
		cc := serve(t, s, retrygrpc.DialOptions(p)...)
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
			cc := serve(t, s, retrygrpc.DialOptions(fast)...)
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

// streamCounter is a stream interceptor placed under the retrying one: it
// counts the attempts opened, on the client, as they happen.
func streamCounter(n *atomic.Int32) grpc.DialOption {
	return grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		n.Add(1)
		return streamer(ctx, desc, cc, method, opts...)
	})
}

// listenOnly reads the client's messages and answers nothing until the
// client closes its side: the stream stays uncommitted.
func listenOnly(_ int, st grpc.ServerStream) error {
	for {
		if err := st.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			return nil
		}
	}
}

// recvFirst is a stream interceptor placed under the retrying one that
// holds back the return of a SendMsg failing on the client until a
// concurrent RecvMsg has seen the stream end (or a second has passed): the
// order in which RecvMsg could take the failure for a retryable one.
func recvFirst() grpc.DialOption {
	return grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &recvFirstStream{ClientStream: cs, recvEnded: make(chan struct{})}, nil
	})
}

type recvFirstStream struct {
	grpc.ClientStream
	recvEnded chan struct{}
	once      sync.Once
}

func (r *recvFirstStream) RecvMsg(m any) error {
	err := r.ClientStream.RecvMsg(m)
	if err != nil {
		r.once.Do(func() { close(r.recvEnded) })
	}
	return err
}

func (r *recvFirstStream) SendMsg(m any) error {
	err := r.ClientStream.SendMsg(m)
	if err != nil && err != io.EOF {
		select {
		case <-r.recvEnded:
		case <-time.After(time.Second):
		}
	}
	return err
}

// A message above grpc.MaxCallSendMsgSize makes grpc-go fail SendMsg on
// the client and end the stream. That commits: SendMsg and RecvMsg return
// grpc-go's error, as without the interceptor, and no new attempt replays
// the messages (which would fail the same way, or reach a server that the
// first attempt never reached). A RecvMsg in flight that sees the stream
// end before SendMsg returns must not retry either.
func TestStreamLocalSendFailureCommits(t *testing.T) {
	for _, concurrent := range []bool{false, true} {
		var attempts atomic.Int32
		dopts := append(retrygrpc.DialOptions(fast), streamCounter(&attempts))
		if concurrent {
			dopts = append(dopts, recvFirst())
		}
		s := &echoServer{bidi: listenOnly}
		cc := serve(t, s, dopts...)
		cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi, grpc.MaxCallSendMsgSize(50))
		if err != nil {
			t.Fatal(err)
		}
		recvErr := make(chan error, 1)
		if concurrent {
			go func() { recvErr <- cs.RecvMsg(new(wrapperspb.StringValue)) }()
		}
		if err := cs.SendMsg(wrapperspb.String("a")); err != nil {
			t.Fatal(err)
		}
		serr := cs.SendMsg(wrapperspb.String(strings.Repeat("x", 100)))
		if !concurrent {
			recvErr <- cs.RecvMsg(new(wrapperspb.StringValue))
		}
		rerr := <-recvErr
		for _, err := range []error{serr, rerr} {
			if _, ok := err.(interface{ GRPCStatus() *status.Status }); !ok || status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("concurrent %v: SendMsg = %v, RecvMsg = %v; want grpc-go's RESOURCE_EXHAUSTED from both", concurrent, serr, rerr)
			}
		}
		if n := attempts.Load(); n != 1 {
			t.Fatalf("concurrent %v: %d attempts for a stream that failed on the client, want 1", concurrent, n)
		}
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
					th.SetFleet(0, 1<<40) // accepts galore: probability 0
				}
			}
		})
		return p, th
	}
	rejectAll := func(th *retry.Throttle) { th.SetFleet(1<<60, 0) }
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
	ccu := serve(t, su, retrygrpc.DialOptions(p)...)
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
	ccs := serve(t, ss, retrygrpc.DialOptions(p)...)
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
				cc := serve(t, s, retrygrpc.DialOptions(p)...)
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

// Header never retries: on an attempt that failed without headers it
// returns nil, nil, as grpc-go's does, and the server has seen one
// attempt; the next RecvMsg retries, and Header then gives the headers of
// the attempt that answered.
func TestStreamHeaderDoesNotRetry(t *testing.T) {
	rec := new(recorder)
	fail := failAfterReading(rec, 1, 0, false, codes.Unavailable)
	s := &echoServer{bidi: func(n int, st grpc.ServerStream) error {
		if n > 1 {
			st.SendHeader(metadata.Pairs("attempt", strconv.Itoa(n)))
		}
		return fail(n, st)
	}}
	cc := serve(t, s, retrygrpc.DialOptions(fast)...)
	cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	sendAll(t, cs, "a")
	md, err := cs.Header()
	if md != nil || err != nil || s.Calls(methodBidi) != 1 {
		t.Fatalf("Header() = %v, %v after %d attempts; want nil, nil after 1", md, err, s.Calls(methodBidi))
	}
	got, err := recvAll(cs)
	if err != nil || !slices.Equal(got, []string{"a"}) || s.Calls(methodBidi) != 2 {
		t.Fatalf("got %q, %v after %d attempts; want [a] after 2", got, err, s.Calls(methodBidi))
	}
	if md, err := cs.Header(); err != nil || !slices.Equal(md.Get("attempt"), []string{"2"}) {
		t.Fatalf("Header() after the retry = %v, %v; want attempt 2's", md, err)
	}
}

// gateOpen is a stream interceptor placed under the retrying one: the
// open of attempt number at tells opening and waits for release before it
// calls the streamer (a slow connection, a slow resolver).
func gateOpen(at int32, opening, release chan struct{}) grpc.DialOption {
	var n atomic.Int32
	return grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if n.Add(1) == at {
			close(opening)
			<-release
		}
		return streamer(ctx, desc, cc, method, opts...)
	})
}

// The stream commits (a message that does not fit in the replay buffer)
// while a retry is opening its new attempt. Promise (StreamClientInterceptor):
// past the buffer the stream commits and is no longer retried, and a retry
// sends the messages again in order. So the retry must not go on with the
// buffer the commit emptied: the new attempt is abandoned, and RecvMsg
// fails with the error of the attempt that failed.
func TestStreamCommitWhileRetryOpensEndsTheRetry(t *testing.T) {
	rec := new(recorder)
	s := &echoServer{bidi: func(n int, st grpc.ServerStream) error {
		if n == 1 {
			st.RecvMsg(new(wrapperspb.StringValue)) // read "a", answer nothing
			return status.Error(codes.Unavailable, "restarting")
		}
		for {
			in := new(wrapperspb.StringValue)
			if err := st.RecvMsg(in); err != nil {
				return nil // io.EOF: a normal end, OK
			}
			rec.add(n, in.GetValue())
		}
	}}
	opening, release := make(chan struct{}), make(chan struct{})
	cc := serve(t, s, append(retrygrpc.DialOptions(fast, retrygrpc.WithMaxBuffer(50)), gateOpen(2, opening, release))...)
	cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	recvErr := recvWhileRetryOpens(t, cs, opening)
	// Past the 50-byte buffer: the stream commits.
	serr := cs.SendMsg(wrapperspb.String(strings.Repeat("b", 100)))
	cerr := cs.CloseSend()
	close(release)
	var rerr error
	select {
	case rerr = <-recvErr:
	case <-time.After(10 * time.Second):
		t.Fatal("RecvMsg did not return")
	}
	if _, ok := rerr.(interface{ GRPCStatus() *status.Status }); !ok || status.Code(rerr) != codes.Unavailable || status.Convert(rerr).Message() != "restarting" {
		t.Fatalf("RecvMsg = %T %v (SendMsg = %v, CloseSend = %v, attempt 2 received %q); want attempt 1's UNAVAILABLE unchanged",
			rerr, rerr, serr, cerr, rec.get(2))
	}
	if got := rec.get(2); len(got) != 0 {
		t.Fatalf("the abandoned attempt 2 received %q", got)
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
		cc := serveWindows(t, s, retrygrpc.DialOptions(fast)...)
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
	cc := serveWindows(t, s, retrygrpc.DialOptions(fast)...)
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
	cc := serveWindows(t, s, retrygrpc.DialOptions(fast)...)
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
				th.SetFleet(0, 1<<40) // let the next attempt through
			}
			if e.Waited > 0 {
				name += "+waited" // after a wait: Waited carried over as retry.Do does
			}
			events = append(events, name)
		})
		fail := func(n int) bool {
			if n == 1 && !rejectFirst {
				th.SetFleet(1<<60, 0) // reject the next attempt
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
		cc := serve(t, s, retrygrpc.DialOptions(p)...)
		if rejectFirst {
			th.SetFleet(1<<60, 0)
		}
		callEcho(t, t.Context(), cc, stream)
		mu.Lock()
		defer mu.Unlock()
		first, retries := b.LocalCounts()
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
		cc := serve(t, s, retrygrpc.DialOptions(p)...)
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
		if first, retries := b.LocalCounts(); first != 2 || retries != 1 {
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
	ccu := serve(t, &echoServer{}, retrygrpc.DialOptions(pu)...)
	for range calls {
		if err := ccu.Invoke(t.Context(), methodUnary, big, new(wrapperspb.StringValue), grpc.MaxCallSendMsgSize(50)); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("unary: %v", err)
		}
	}

	ths := newThrottle()
	ps := fast
	ps.Throttle = ths
	ccs := serve(t, &echoServer{bidi: listenOnly}, retrygrpc.DialOptions(ps)...)
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

// firstAttempt reports whether st is a stream's first attempt (it carries
// no grpc-previous-rpc-attempts).
func firstAttempt(st grpc.ServerStream) bool {
	md, _ := metadata.FromIncomingContext(st.Context())
	return len(md.Get(retrygrpc.HeaderPreviousAttempts)) == 0
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

// warm opens and ends one plain stream so that the connection's own
// goroutines exist before goleak.IgnoreCurrent.
func warm(t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cs, err := cc.NewStream(ctx, bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	cs.CloseSend()
	recvAll(cs)
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
	cc := serve(t, s, retrygrpc.DialOptions(fast)...)
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
	cc := serve(t, s, retrygrpc.DialOptions(fast)...)
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

// holdLocalSend is a stream interceptor placed under the retrying one. On
// attempt 1, a SendMsg that grpc-go fails on the client (not io.EOF)
// tells failed and returns only once attempt 2 has been sent a message,
// or 200 ms after attempt 2 was opened: the SendMsg goroutine is
// descheduled between grpc-go's return and the interceptor's
// bookkeeping, past the moment the retry makes attempt 2 current. On
// attempt 2 it records what was sent.
func holdLocalSend(failed chan struct{}, sent2 *recorder) grpc.DialOption {
	var (
		mu      sync.Mutex
		n       int
		opened2 = make(chan struct{})
		second  = make(chan struct{})
		once    sync.Once
	)
	return grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		n++
		h := &holdStream{ClientStream: cs, attempt: n, failed: failed, opened2: opened2, second: second, once: &once, sent2: sent2}
		mu.Unlock()
		if h.attempt == 2 {
			close(opened2)
		}
		return h, nil
	})
}

type holdStream struct {
	grpc.ClientStream
	attempt int
	failed  chan struct{}
	opened2 chan struct{} // closed when attempt 2 is opened
	second  chan struct{} // closed when attempt 2 is sent a message
	once    *sync.Once
	sent2   *recorder
}

func (h *holdStream) SendMsg(m any) error {
	if h.attempt == 2 {
		h.sent2.add(2, m.(*wrapperspb.StringValue).GetValue())
		h.once.Do(func() { close(h.second) })
	}
	err := h.ClientStream.SendMsg(m)
	if h.attempt == 1 && err != nil && err != io.EOF {
		close(h.failed)
		select {
		case <-h.second:
		case <-h.opened2:
			select {
			case <-h.second:
			case <-time.After(200 * time.Millisecond):
			}
		case <-time.After(10 * time.Second):
		}
	}
	return err
}

// A SendMsg that grpc-go fails on the client commits the stream; here it
// does so while a retry (started by RecvMsg on another goroutine) is
// opening attempt 2, and its bookkeeping comes only after attempt 2 is
// open. Promises (StreamClientInterceptor): a SendMsg error other than
// io.EOF commits, "that error is returned by SendMsg, and by RecvMsg
// after it, as without the interceptor"; "A stream that commits while a
// retry is opening its new stream (a SendMsg on another goroutine) ends
// the retry: the new stream is cancelled unused, and RecvMsg returns the
// error of the attempt that failed." So attempt 2 is sent nothing (the
// kept SendMsg in flight is waited for before attempt 2 becomes current).
func TestStreamLocalSendFailureWhileRetryOpensEndsTheRetry(t *testing.T) {
	s := &echoServer{bidi: func(n int, st grpc.ServerStream) error {
		if firstAttempt(st) {
			st.RecvMsg(new(wrapperspb.StringValue))
			return status.Error(codes.Unavailable, "restarting")
		}
		return echoAll(st)
	}}
	opening, release, failed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	sent2 := new(recorder)
	cc := serve(t, s, append(retrygrpc.DialOptions(fast), gateOpen(2, opening, release), holdLocalSend(failed, sent2))...)
	cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi, grpc.MaxCallSendMsgSize(50))
	if err != nil {
		t.Fatal(err)
	}
	recvErr := recvWhileRetryOpens(t, cs, opening)
	sendErr := make(chan error, 1)
	go func() { sendErr <- cs.SendMsg(wrapperspb.String(strings.Repeat("x", 100))) }()
	<-failed // grpc-go refused the message on attempt 1
	close(release)
	serr := <-sendErr
	var rerr error
	select {
	case rerr = <-recvErr:
	case <-time.After(10 * time.Second):
		t.Fatal("RecvMsg did not return")
	}
	if status.Code(serr) != codes.ResourceExhausted {
		t.Fatalf("SendMsg = %v, want grpc-go's RESOURCE_EXHAUSTED", serr)
	}
	if got := sent2.get(2); len(got) != 0 {
		t.Fatalf("the stream committed (SendMsg failed on the client) before attempt 2 was used, yet attempt 2 was sent %q; RecvMsg = %T %v",
			got, rerr, rerr)
	}
	if _, ok := rerr.(interface{ GRPCStatus() *status.Status }); !ok || status.Code(rerr) != codes.Unavailable {
		t.Fatalf("RecvMsg = %T %v; want attempt 1's UNAVAILABLE unchanged", rerr, rerr)
	}
}

// The first attempt of a stream fails to open with an error whose server
// wait is beyond WithMaxServerDelay (from a client-side limiter
// interceptor below this one; a "do not retry" answer is refused alike).
// Promise (StreamClientInterceptor): "A "do not retry" pushback, or a
// server wait beyond WithMaxServerDelay, on the first failure gives a
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
	cc := serve(t, &echoServer{}, append(retrygrpc.DialOptions(fast), limiter...)...)
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

// recvWhileRetryOpens sends "a" on cs, starts a RecvMsg whose error it
// returns on the channel, and waits until the retry that attempt 1's
// failure starts is opening attempt 2 (opening, from gateOpen).
func recvWhileRetryOpens(t *testing.T, cs grpc.ClientStream, opening <-chan struct{}) <-chan error {
	t.Helper()
	if err := cs.SendMsg(wrapperspb.String("a")); err != nil {
		t.Fatal(err)
	}
	recvErr := make(chan error, 1)
	go func() { recvErr <- cs.RecvMsg(new(wrapperspb.StringValue)) }()
	select {
	case <-opening:
	case <-time.After(10 * time.Second):
		t.Fatal("no retry started")
	}
	return recvErr
}

// With MaxElapsed, a stream's Elapsed (in the Observer's events and in the
// *retry.Error) counts from the stream's start, as retry.Do counts from
// before its first attempt: the first attempt's time is in it.
func TestStreamElapsedFromStartWithMaxElapsed(t *testing.T) {
	const first = 200 * time.Millisecond
	for _, okAfter := range []int{2, 0} { // succeeds at the second attempt; never
		var (
			mu     sync.Mutex
			events []retry.Event
		)
		p := retry.Policy{Initial: time.Millisecond, Multiplier: 1, MaxDelay: time.Millisecond, Jitter: retry.NoJitter,
			MaxAttempts: 3, MaxElapsed: 10 * time.Second,
			Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			})}
		s := &echoServer{bidi: func(n int, st grpc.ServerStream) error {
			if n == 1 {
				time.Sleep(first)
			}
			if n != okAfter {
				return status.Error(codes.Unavailable, "down")
			}
			return echoAll(st)
		}}
		cc := serve(t, s, grpc.WithStreamInterceptor(retrygrpc.StreamClientInterceptor(p)), grpc.WithDisableRetry())
		cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
		if err != nil {
			t.Fatal(err)
		}
		cs.SendMsg(wrapperspb.String("a"))
		cs.CloseSend()
		_, err = recvAll(cs)
		mu.Lock()
		var retries, dones []retry.Event
		for _, e := range events {
			switch e.Kind {
			case retry.EventRetry:
				retries = append(retries, e)
			case retry.EventDone:
				dones = append(dones, e)
			}
		}
		mu.Unlock()
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
