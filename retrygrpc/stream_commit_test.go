package retrygrpc_test

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry/retrygrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestStreamCommittedByMessage(t *testing.T) {
	rec := new(recorder)
	s := &echoServer{bidi: failAfterReading(rec, 1, 1, false, codes.Unavailable)}
	cc := serve(t, s, dialOptions(t, fast)...)
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
	cc := serve(t, s, dialOptions(t, fast)...)
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
	cc := serve(t, s, dialOptions(t, fast, retrygrpc.WithMaxBuffer(10))...)
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

// streamCounter is a stream interceptor placed under the retrying one: it
// counts the attempts opened, on the client, as they happen.
func streamCounter(n *atomic.Int32) grpc.DialOption {
	return grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		n.Add(1)
		return streamer(ctx, desc, cc, method, opts...)
	})
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
		dopts := append(dialOptions(t, fast), streamCounter(&attempts))
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
	cc := serve(t, s, append(dialOptions(t, fast, retrygrpc.WithMaxBuffer(50)), gateOpen(2, opening, release))...)
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
	cc := serve(t, s, append(dialOptions(t, fast), gateOpen(2, opening, release), holdLocalSend(failed, sent2))...)
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
