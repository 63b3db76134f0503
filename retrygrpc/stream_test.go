package retrygrpc_test

import (
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
	"github.com/retrykit/retry/retrygrpc"
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
			cs, err := cc.NewStream(t.Context(), bidiDesc, methodBidi)
			if err != nil {
				t.Fatal(err)
			}
			sendAll(t, cs, "a")
			if _, err := recvAll(cs); err != nil {
				t.Fatal(err)
			}
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
