package retryhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

// stallBody yields prefix, then blocks until its request's context ends,
// as the body of a server that sent its headers and stalled does.
type stallBody struct {
	ctx    context.Context
	prefix *strings.Reader
	closed atomic.Bool
}

func (b *stallBody) Read(p []byte) (int, error) {
	if b.prefix.Len() > 0 {
		return b.prefix.Read(p)
	}
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

func (b *stallBody) Close() error { b.closed.Store(true); return nil }

// A retried response whose body stalls after the headers must not hold the
// call beyond Policy.AttemptTimeout: the transport drains it itself, so
// the attempt is not over until that drain is, short (below 64 KiB, read
// by release) or long (closed before the wait).
func TestStalledRetriedBodyBoundedByAttemptTimeout(t *testing.T) {
	for _, tc := range []struct {
		name          string
		size          int
		contentLength int64
	}{
		{"short", 10, -1},
		{"long", 100 << 10, -1},
		{"long with Content-Length", 10 << 10, 1 << 20},
	} {
		size := tc.size
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var n atomic.Int32
				var first *stallBody
				rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					if n.Add(1) == 1 {
						first = &stallBody{ctx: r.Context(), prefix: strings.NewReader(strings.Repeat("e", size))}
						return &http.Response{StatusCode: 503, Status: "503 Service Unavailable", Header: http.Header{},
							ContentLength: tc.contentLength, Body: first, Request: r}, nil
					}
					return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{},
						Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
				})
				const d = time.Second
				tr := &retryhttp.Transport{Base: rt, Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 3, AttemptTimeout: d}}
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1/x", nil)
				start := time.Now()
				resp, err := tr.RoundTrip(req)
				took := time.Since(start)
				if err != nil {
					t.Fatalf("err %v after %v", err, took)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(b) != "ok" || took > 2*d {
					t.Fatalf("status %d body %q after %v, %d sends: want the retry's 200 within about AttemptTimeout", resp.StatusCode, b, took, n.Load())
				}
				if !first.closed.Load() {
					t.Fatal("the stalled body was never closed")
				}
			})
		})
	}
}

// If the drain of a retried response runs out of the attempt timeout, the
// attempt timed out; when the loop then gives up (here a Budget refuses the
// retry), RoundTrip returns at once with that timeout, not after the
// caller's context.
func TestStalledRetriedBodyGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var body *stallBody
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			body = &stallBody{ctx: r.Context(), prefix: strings.NewReader("partial")}
			return &http.Response{StatusCode: 503, Status: "503 Service Unavailable", Header: http.Header{},
				ContentLength: -1, Body: body, Request: r}, nil
		})
		const d = time.Second
		budget, berr := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: -1})
		if berr != nil {
			t.Fatal(berr)
		}
		tr := &retryhttp.Transport{Base: rt, Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 2, AttemptTimeout: d, Budget: budget}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1/x", nil)
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		took := time.Since(start)
		if resp != nil {
			resp.Body.Close()
		}
		var re *retry.Error
		var te interface{ Timeout() bool }
		if resp != nil || !errors.As(err, &re) || re.Reason != retry.ReasonBudget || !errors.As(err, &te) || !te.Timeout() || took > 2*d {
			t.Fatalf("resp %v, err %v after %v: want the attempt's timeout, at once", resp, err, took)
		}
		if !body.closed.Load() {
			t.Fatal("the stalled body was never closed")
		}
	})
}

// A body without GetBody is buffered before the first attempt; when the
// request's context ends while that read is blocked (a pipe written, then
// held open, as a streaming client does), RoundTrip must return with the
// context's error, not wait for the producer.
func TestContextEndsWhileBufferingBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pr, pw := io.Pipe()
		defer pw.Close()
		go pw.Write([]byte("first message")) // then the producer waits
		var sent atomic.Int32
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent.Add(1)
			if r.Body != nil {
				r.Body.Close()
			}
			return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{}, Body: http.NoBody, Request: r}, nil
		})
		tr := &retryhttp.Transport{Base: rt, Policy: retry.Policy{MaxAttempts: 3}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "PUT", "http://127.0.0.1/x", pr)
		done := make(chan error, 1)
		go func() {
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				resp.Body.Close()
			}
			done <- err
		}()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err %v, want the context's", err)
			}
		default:
			pw.CloseWithError(errors.New("test over"))
			<-done
			t.Fatal("RoundTrip still blocked reading the request body 1 s after its context ended")
		}
	})
}

// A http.Client's CloseIdleConnections reaches its transport only through
// a CloseIdleConnections method: the Transport must pass it on to Base.
type idleRT struct {
	http.RoundTripper
	closed atomic.Int32
}

func (r *idleRT) CloseIdleConnections() { r.closed.Add(1) }

func TestCloseIdleConnectionsReachesBase(t *testing.T) {
	base := &idleRT{RoundTripper: http.DefaultTransport}
	c := &http.Client{Transport: &retryhttp.Transport{Base: base}}
	c.CloseIdleConnections()
	if base.closed.Load() != 1 {
		t.Fatal("http.Client.CloseIdleConnections did not reach Base: idle connections leak")
	}
	// And through Base's own default.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	own := &http.Transport{}
	c = &http.Client{Transport: &retryhttp.Transport{Base: own}}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.CloseIdleConnections()
}

// A Base that breaks the RoundTripper contract with (nil, nil) must give
// an error, not a panic, as http.Client does for its own transport.
func TestBaseReturnsNilNil(t *testing.T) {
	for _, p := range []retry.Policy{{MaxAttempts: 2, Initial: retry.Immediate}, {MaxAttempts: 2, Initial: retry.Immediate, AttemptTimeout: time.Second}} {
		tr := &retryhttp.Transport{Base: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil }), Policy: p}
		req, _ := http.NewRequest("GET", "http://127.0.0.1/x", nil)
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Fatalf("panic: %v", v)
				}
			}()
			resp, err := tr.RoundTrip(req)
			if resp != nil || err == nil {
				t.Fatalf("resp %v, err %v: want an error", resp, err)
			}
		}()
	}
}

// Middleware's ResponseWriter keeps the capabilities of net/http's:
// io.ReaderFrom (sendfile) too.
func TestMiddlewareKeepsReaderFrom(t *testing.T) {
	var ok bool
	h := retryhttp.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, ok = w.(io.ReaderFrom)
		if rf, isRF := w.(io.ReaderFrom); isRF {
			rf.ReadFrom(strings.NewReader("hello"))
		} else {
			w.Write([]byte("hello"))
		}
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hello" || resp.StatusCode != 200 {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
	if !ok {
		t.Fatal("the ResponseWriter given to the handler lost io.ReaderFrom")
	}
}

// Over HTTP/2, a retried request's body is sent whole on every attempt,
// whether replayed through GetBody or buffered, and the retried
// responses' streams are released.
func TestHTTP2BodiesReplayedWhole(t *testing.T) {
	want := strings.Repeat("0123456789abcdef", 8<<10) // 128 KiB
	var n atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if r.ProtoMajor != 2 || err != nil || string(b) != want {
			t.Errorf("attempt %s over HTTP/%d: %d bytes, %v", r.Header.Get(retryhttp.HeaderAttempt), r.ProtoMajor, len(b), err)
		}
		if n.Add(1)%3 != 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(strings.Repeat("e", 100<<10)))
			return
		}
		w.Write([]byte("ok"))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	tr := &retryhttp.Transport{Base: srv.Client().Transport, Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for _, withGetBody := range []bool{true, false} {
		var body io.Reader = strings.NewReader(want)
		if !withGetBody {
			body = struct{ io.Reader }{body}
		}
		req, _ := http.NewRequest("PUT", srv.URL, body)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != "ok" || retryhttp.Attempts(resp) != 3 {
			t.Fatalf("GetBody %v: %q, %v, %d attempts", withGetBody, b, err, retryhttp.Attempts(resp))
		}
	}
}

// countingBody counts its Close calls; it has no GetBody, so the
// transport buffers it.
type countingBody struct {
	io.Reader
	closes atomic.Int32
}

func (b *countingBody) Close() error { b.closes.Add(1); return nil }

// TestBufferedBodyClosedOnce: with the request's context already ended,
// the buffering's AfterFunc closes the caller's body; the transport must
// not close it a second time, concurrently (io.Closer leaves a second
// Close undefined).
func TestBufferedBodyClosedOnce(t *testing.T) {
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return nil, r.Context().Err()
	})
	tr := &retryhttp.Transport{Base: rt, Policy: retry.Policy{MaxAttempts: 3}}
	for range 50 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		body := &countingBody{Reader: strings.NewReader("small")}
		req, _ := http.NewRequestWithContext(ctx, "PUT", "http://127.0.0.1/x", body)
		req.GetBody = nil
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
		// The close may come from another goroutine, after RoundTrip
		// returned, as the RoundTripper contract allows.
		for deadline := time.Now().Add(time.Second); body.closes.Load() == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(5 * time.Millisecond) // room for a second close, if any
		if n := body.closes.Load(); n != 1 {
			t.Fatalf("the caller's body was closed %d times, want once", n)
		}
	}
}
