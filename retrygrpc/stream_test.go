package retrygrpc_test

import (
	"context"
	"io"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/retrykit/retry/retrygrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
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
	cc := serve(t, s, dialOptions(t, fast)...)
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

// A sender and a receiver on two goroutines while the first attempt fails
// part-way: every message arrives once, in order, on the attempt that
// succeeds.
func TestStreamConcurrentSendRecv(t *testing.T) {
	rec := new(recorder)
	s := &echoServer{bidi: failAfterReading(rec, 5, 0, false, codes.Unavailable)}
	cc := serve(t, s, dialOptions(t, fast)...)
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

// listenOnly reads the client's messages and answers nothing until the
// client closes its side: the stream stays uncommitted.
func listenOnly(_ int, st grpc.ServerStream) error {
	for {
		if err := st.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			return nil
		}
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
	cc := serve(t, s, dialOptions(t, fast)...)
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

// firstAttempt reports whether st is a stream's first attempt (it carries
// no grpc-previous-rpc-attempts).
func firstAttempt(st grpc.ServerStream) bool {
	md, _ := metadata.FromIncomingContext(st.Context())
	return len(md.Get(retrygrpc.HeaderPreviousAttempts)) == 0
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
