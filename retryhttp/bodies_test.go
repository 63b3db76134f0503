package retryhttp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retrytest"
)

// trailerBody is a request body that, as net/http documents for request
// trailers, fills in its request's Trailer once it has been read to the end.
type trailerBody struct {
	r       io.Reader
	trailer http.Header
}

func (b *trailerBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.trailer.Set("X-Checksum", "abc123")
	}
	return n, err
}

func (b *trailerBody) Close() error { return nil }

// TestRequestTrailersSent: a request trailer whose value is set while the
// body is read (the way net/http documents it) reaches the server through a
// Transport exactly as through its Base, on every path that sends a clone of
// the caller's request: under an AttemptTimeout, for a body too large to
// buffer, and for a request that carried its own Retry-Attempt header.
func TestRequestTrailersSent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Got-Trailer", r.Trailer.Get("X-Checksum"))
	}))
	defer srv.Close()

	payload := strings.Repeat("x", 100)
	newReq := func(t *testing.T, withGetBody, attemptHeader bool) *http.Request {
		req, err := http.NewRequest(http.MethodPut, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Trailer = http.Header{"X-Checksum": nil}
		req.ContentLength = -1
		req.Body = &trailerBody{strings.NewReader(payload), req.Trailer}
		if withGetBody {
			req.GetBody = func() (io.ReadCloser, error) {
				return &trailerBody{strings.NewReader(payload), req.Trailer}, nil
			}
		}
		if attemptHeader {
			req.Header.Set(retryhttp.HeaderAttempt, "3")
		}
		return req
	}
	cases := []struct {
		name                       string
		tr                         *retryhttp.Transport
		withGetBody, attemptHeader bool
	}{
		{"base alone", nil, true, false},
		{"plain policy", &retryhttp.Transport{Policy: retry.Policy{MaxAttempts: 2}}, true, false},
		{"attempt timeout", &retryhttp.Transport{Policy: retry.Policy{MaxAttempts: 2, AttemptTimeout: time.Minute}}, true, false},
		{"streamed body", &retryhttp.Transport{Policy: retry.Policy{MaxAttempts: 2}, MaxBufferedBody: 10}, false, false},
		{"caller's Retry-Attempt", &retryhttp.Transport{Policy: retry.Policy{MaxAttempts: 2}}, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var rt http.RoundTripper = http.DefaultTransport
			if tc.tr != nil {
				rt = tc.tr
			}
			resp, err := rt.RoundTrip(newReq(t, tc.withGetBody, tc.attemptHeader))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if got := resp.Header.Get("Got-Trailer"); got != "abc123" {
				t.Errorf("server saw trailer X-Checksum = %q, want %q", got, "abc123")
			}
		})
	}
}

// TestThrottledRetryKeepsLargeResponse: "Giving up: on a retryable status
// the last response is returned (status, headers, readable body) with a nil
// error", also when a Throttle rejects the retries that follow it (the
// loop's own comment: "perhaps followed by attempts a Throttle rejected").
// A 503 whose body is longer than 64 KiB (or a HEAD answer announcing such
// a length) was dropped at EventRetry, so a throttled retry turned the
// server's answer into a bare ErrThrottled error: status, Retry-After and
// body all lost.
func TestThrottledRetryKeepsLargeResponse(t *testing.T) {
	const size = 100_000
	payload := strings.Repeat("e", size)
	for _, tc := range []struct {
		name, method string
		chunked      bool
	}{
		{"GET with Content-Length", http.MethodGet, false},
		{"GET chunked", http.MethodGet, true},
		{"HEAD", http.MethodHead, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !tc.chunked {
					w.Header().Set("Content-Length", "100000")
				}
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
				if r.Method != http.MethodHead {
					io.WriteString(w, payload)
				}
			}))
			defer srv.Close()
			th, err := retry.NewThrottle(retry.ThrottleConfig{})
			if err != nil {
				t.Fatal(err)
			}
			p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 2, Throttle: th,
				Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
					if e.Kind == retry.EventRetry {
						th.Override(retry.ThrottleRejectAll) // the retry is rejected locally
					}
				})}
			tr := &retryhttp.Transport{Policy: p, MaxServerWait: -1}
			defer tr.CloseIdleConnections()
			req, _ := http.NewRequest(tc.method, srv.URL, nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip: %v; want the server's 503", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || !retryhttp.Exhausted(resp) || resp.Header.Get("Retry-After") != "1" {
				t.Fatalf("status %d, exhausted %v, header %v", resp.StatusCode, retryhttp.Exhausted(resp), resp.Header)
			}
			// The body may not be whole (its rest was closed before the
			// wait), but it must not end silently short.
			b, err := io.ReadAll(resp.Body)
			if tc.method == http.MethodGet && err == nil && string(b) != payload {
				t.Errorf("body of %d bytes ended with io.EOF: silently truncated", len(b))
			}
		})
	}
}

// onlyReader hides the concrete type so http.NewRequest sets no GetBody.
type onlyReader struct{ io.Reader }

func TestBodyWithoutGetBody(t *testing.T) {
	t.Run("small buffered", func(t *testing.T) {
		s, srv := newScript(t, 503, 200)
		c := client(t, &retryhttp.Transport{Policy: fast, MaxBufferedBody: 16})
		req, _ := http.NewRequest("PUT", srv.URL, onlyReader{strings.NewReader("0123456789abcdef")})
		if req.GetBody != nil {
			t.Fatal("GetBody set")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if s.n() != 2 || s.bodies[0] != "0123456789abcdef" || s.bodies[1] != s.bodies[0] {
			t.Fatalf("bodies %q", s.bodies)
		}
	})
	t.Run("large sent once", func(t *testing.T) {
		s, srv := newScript(t, 503, 200)
		c := client(t, &retryhttp.Transport{Policy: fast, MaxBufferedBody: 16})
		req, _ := http.NewRequest("PUT", srv.URL, onlyReader{strings.NewReader("0123456789abcdefX")})
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if s.n() != 1 || s.bodies[0] != "0123456789abcdefX" || resp.StatusCode != 503 {
			t.Fatalf("bodies %q status %d", s.bodies, resp.StatusCode)
		}
	})
}

// upgradeServer answers statuses[i] to the i-th request (the last one
// repeats), and switches protocols on a 101: it then echoes every line.
func upgradeServer(t *testing.T, statuses ...int) *httptest.Server {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := min(int(n.Add(1)), len(statuses)) - 1
		if statuses[i] != http.StatusSwitchingProtocols {
			w.WriteHeader(statuses[i])
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		brw.Flush()
		for {
			line, err := brw.ReadString('\n')
			if err != nil {
				return
			}
			brw.WriteString(line)
			brw.Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Item 2: the body of a 101 response stays an io.ReadWriteCloser through
// the Transport, with an attempt timeout, after retries, or both.
func TestSwitchingProtocolsBodyWritable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		timeout  time.Duration
		statuses []int
	}{
		{"attempt timeout", 5 * time.Second, []int{101}},
		{"after a retry", 0, []int{503, 101}},
		{"attempt timeout after a retry", 5 * time.Second, []int{503, 101}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := upgradeServer(t, tc.statuses...)
			c := client(t, &retryhttp.Transport{Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 3, AttemptTimeout: tc.timeout}})
			req, _ := http.NewRequest("GET", srv.URL, nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "echo")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusSwitchingProtocols || retryhttp.Attempts(resp) != len(tc.statuses) {
				t.Fatalf("status %d after %d attempts", resp.StatusCode, retryhttp.Attempts(resp))
			}
			rw, ok := resp.Body.(io.ReadWriteCloser)
			if !ok {
				t.Fatalf("101 body %T is not an io.ReadWriteCloser", resp.Body)
			}
			if _, err := io.WriteString(rw, "ping\n"); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(rw).ReadString('\n')
			if err != nil || line != "ping\n" {
				t.Fatalf("echo %q, %v", line, err)
			}
		})
	}
}

// Item 6: a retried response's connection is released before the wait,
// not when the next attempt starts.
func TestConnectionReleasedBeforeWait(t *testing.T) {
	for _, size := range []int{4, 200 << 10} {
		t.Run(fmt.Sprint(size, " bytes"), func(t *testing.T) { connectionReleasedBeforeWait(t, size) })
	}
}

func connectionReleasedBeforeWait(t *testing.T, size int) {
	seen := make(chan struct{})
	var once sync.Once
	payload := strings.Repeat("b", size)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/side" {
			io.WriteString(w, "side")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, payload)
		once.Do(func() { close(seen) })
	}))
	defer srv.Close()
	base := &http.Transport{MaxConnsPerHost: 1}
	defer base.CloseIdleConnections()
	tr := &retryhttp.Transport{Base: base, Policy: retry.Policy{Initial: time.Hour, MaxDelay: time.Hour, MaxAttempts: 2}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/main", nil)
		_, err := tr.RoundTrip(req)
		done <- err
	}()
	<-seen
	// The main request now waits an hour before its retry. With one
	// connection per host, another request gets through only if the
	// 503's connection was released.
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	req, _ := http.NewRequestWithContext(sctx, "GET", srv.URL+"/side", nil)
	resp, err := base.RoundTrip(req)
	cancel()
	if err != nil {
		t.Fatalf("side request during the wait: %v; want the connection released", err)
	}
	resp.Body.Close()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("main request: %v", err)
	}
}

// Item 6, the other side: a response read before the wait is returned
// whole when the loop gives up instead of retrying.
func TestReleasedResponseReturnedWhole(t *testing.T) {
	for _, size := range []int{10, 200 << 10} {
		t.Run(fmt.Sprint(size, " bytes"), func(t *testing.T) {
			payload := strings.Repeat("z", size)
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				w.Header().Set("Retry-After", "30")
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, payload)
			}))
			defer srv.Close()
			c := client(t, &retryhttp.Transport{Policy: fast})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(b) != payload || n.Load() != 1 || resp.StatusCode != 503 {
				t.Fatalf("read %d bytes (%v) of %d, %d sends, status %d", len(b), err, size, n.Load(), resp.StatusCode)
			}
		})
	}
}

var errNoRewind = errors.New("cannot rewind")

// Item 8: a failing GetBody keeps the last response and the error chain.
func TestGetBodyFailure(t *testing.T) {
	newReq := func(url string) *http.Request {
		req, _ := http.NewRequest("PUT", url, strings.NewReader("payload"))
		req.GetBody = func() (io.ReadCloser, error) { return nil, errNoRewind }
		return req
	}
	t.Run("after a response", func(t *testing.T) {
		s, srv := newScript(t, 503, 200)
		var rec retrytest.Recorder
		p := fast
		p.Observer = &rec
		c := client(t, &retryhttp.Transport{Policy: p})
		resp, err := c.Do(newReq(srv.URL))
		if err != nil {
			t.Fatalf("err %v; want the last response", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || string(b) != "status Service Unavailable" || s.n() != 1 {
			t.Fatalf("status %d body %q after %d sends", resp.StatusCode, b, s.n())
		}
		if done, _ := rec.Done(); !errors.Is(done.Err, errNoRewind) {
			t.Fatalf("the loop ended with %v; want it to wrap the GetBody error", done.Err)
		}
	})
	t.Run("after a transport error", func(t *testing.T) {
		var n atomic.Int32
		tr := &retryhttp.Transport{Policy: fast, Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			n.Add(1)
			r.Body.Close()
			return nil, io.ErrUnexpectedEOF
		})}
		_, err := tr.RoundTrip(newReq("http://127.0.0.1/x"))
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonPermanent || !errors.Is(err, errNoRewind) || n.Load() != 1 {
			t.Fatalf("err %v after %d sends; want a *retry.Error wrapping the GetBody error", err, n.Load())
		}
	})
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
