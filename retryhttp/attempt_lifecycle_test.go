package retryhttp_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

// ctxBody is a response body that fails once its request's context has
// ended, as a real connection's body does.
type ctxBody struct {
	ctx context.Context
	r   io.Reader
}

func (b *ctxBody) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	return b.r.Read(p)
}

func (b *ctxBody) Close() error { return nil }

// slowRT answers in memory, inside a synctest bubble, after delay(n) for
// its n-th call (1-based), ignoring the request's context, with status(n).
type slowRT struct {
	delay  func(n int) time.Duration
	status func(n int) int
	n      atomic.Int32
}

func (s *slowRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	n := int(s.n.Add(1))
	time.Sleep(s.delay(n))
	code := http.StatusOK
	if s.status != nil {
		code = s.status(n)
	}
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Header: http.Header{},
		Body: &ctxBody{ctx: r.Context(), r: strings.NewReader("ok")}, Request: r}, nil
}

// Item 1: a response that arrives after the attempt timeout fired is a
// timed-out attempt (retried), never a success with a dead body.
func TestAttemptTimeoutRacingHeaders(t *testing.T) {
	const d = time.Second
	t.Run("late", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := &slowRT{delay: func(n int) time.Duration {
				if n == 1 {
					return 2 * d // answers after the timeout, ignoring the context
				}
				return 0
			}}
			tr := &retryhttp.Transport{Base: rt, Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 3, AttemptTimeout: d}}
			req, _ := http.NewRequest("GET", "http://127.0.0.1/x", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(b) != "ok" || rt.n.Load() != 2 || retryhttp.Attempts(resp) != 2 {
				t.Fatalf("body %q, err %v, %d sends, Attempts %d; want the second answer, readable", b, err, rt.n.Load(), retryhttp.Attempts(resp))
			}
		})
	})
	t.Run("exactly at the timeout", func(t *testing.T) {
		// The timer and the answer land on the same instant, in either
		// order: a returned response must always be readable.
		for range 200 {
			synctest.Test(t, func(t *testing.T) {
				rt := &slowRT{delay: func(int) time.Duration { return d }}
				tr := &retryhttp.Transport{Base: rt, Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 3, AttemptTimeout: d}}
				req, _ := http.NewRequest("GET", "http://127.0.0.1/x", nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					var re *retry.Error
					if !errors.As(err, &re) || re.Attempts != 3 || rt.n.Load() != 3 {
						t.Fatalf("err %v after %d sends", err, rt.n.Load())
					}
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != "ok" {
					t.Fatalf("returned a response whose body reads %q, %v", b, err)
				}
			})
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

// Item 3: every attempt the Transport sends is accounted as retry.Do
// accounts it, whether or not it may be retried.
func TestThrottleAccountsEveryAttempt(t *testing.T) {
	t.Run("POST 503 without key", func(t *testing.T) {
		th, _ := retry.NewThrottle(retry.ThrottleConfig{})
		s, srv := newScript(t, 503)
		c := client(t, &retryhttp.Transport{Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 4, Throttle: th}})
		for range 100 {
			resp, err := c.Post(srv.URL, "text/plain", strings.NewReader("x"))
			if err == nil {
				resp.Body.Close()
			}
		}
		// Each POST is sent at most once; the 503s are rejections.
		if p := th.Probability(); p < 0.5 || s.n() > 100 || s.n() < 1 {
			t.Fatalf("rejection probability %.2f after %d sends; want > 0.5", p, s.n())
		}
	})
	t.Run("attempt timeouts", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			th, _ := retry.NewThrottle(retry.ThrottleConfig{})
			rt := &slowRT{delay: func(int) time.Duration { return 2 * time.Second }}
			tr := &retryhttp.Transport{Base: rt, Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 1, AttemptTimeout: time.Second, Throttle: th}}
			for range 20 {
				req, _ := http.NewRequest("GET", "http://127.0.0.1/x", nil)
				if resp, err := tr.RoundTrip(req); err == nil {
					t.Fatalf("status %d; want a timeout", resp.StatusCode)
				}
			}
			if p := th.Probability(); p < 0.5 {
				t.Fatalf("rejection probability %.2f after 20 timeouts; want > 0.5", p)
			}
		})
	})
	for _, limit := range []int64{4, -1} {
		t.Run(fmt.Sprint("body not buffered, MaxBufferedBody ", limit), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				th, _ := retry.NewThrottle(retry.ThrottleConfig{})
				var kinds []string
				obs := retry.ObserverFunc(func(_ context.Context, e retry.Event) { kinds = append(kinds, e.Kind.String()) })
				rt := &slowRT{delay: func(int) time.Duration { return 0 }, status: func(int) int { return 503 }}
				tr := &retryhttp.Transport{Base: rt, MaxBufferedBody: limit,
					Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 4, Throttle: th, Observer: obs}}
				for range 50 {
					req, _ := http.NewRequest("PUT", "http://127.0.0.1/x", onlyReader{strings.NewReader("0123456789")})
					resp, err := tr.RoundTrip(req)
					if err != nil {
						continue // rejected by the throttle before it was sent
					}
					resp.Body.Close()
					if resp.StatusCode != 503 || retryhttp.Exhausted(resp) {
						t.Fatalf("status %d exhausted %v", resp.StatusCode, retryhttp.Exhausted(resp))
					}
				}
				if n := rt.n.Load(); n > 50 || th.Probability() < 0.5 {
					t.Fatalf("%d sends for 50 requests, rejection probability %.2f", n, th.Probability())
				}
				if len(kinds) < 2 || kinds[0] != "attempt" || kinds[len(kinds)-1] != "done" {
					t.Fatalf("observer saw %v; want the attempts through the loop", kinds)
				}
			})
		})
	}
	t.Run("body not buffered, attempt timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := &slowRT{delay: func(int) time.Duration { return 2 * time.Second }}
			tr := &retryhttp.Transport{Base: rt, MaxBufferedBody: 4,
				Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 4, AttemptTimeout: time.Second}}
			req, _ := http.NewRequest("PUT", "http://127.0.0.1/x", onlyReader{strings.NewReader("0123456789")})
			start := time.Now()
			_, err := tr.RoundTrip(req)
			var to interface{ Timeout() bool }
			if !errors.As(err, &to) || !to.Timeout() || rt.n.Load() != 1 || time.Since(start) != 2*time.Second {
				t.Fatalf("err %v after %d sends in %v; want one timed-out attempt, not retried", err, rt.n.Load(), time.Since(start))
			}
		})
	})
}

// Item 4: a Retry-After beyond what a Duration holds is more than
// MaxRetryAfter; no sum wraps around to an early retry.
func TestRetryAfterOverflow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value string
		max   time.Duration
	}{
		{"seconds past Duration", "9223372037", 0},
		{"seconds far past Duration, huge max", "99999999999999999999", math.MaxInt64},
		{"seconds just inside Duration, huge max", "9223372036", math.MaxInt64},
		{"far-future date, huge max", "Fri, 31 Dec 9999 23:59:59 GMT", math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The jitter added to a wait just inside a Duration overflows
			// it only for some draws: try many.
			for range 100 {
				retryAfterOnce(t, tc.value, tc.max)
			}
		})
	}
}

func retryAfterOnce(t *testing.T, value string, max time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		rt := &fakeRT{status: 503, retryAfter: func() string { return value }}
		tr := &retryhttp.Transport{Base: rt, Policy: retry.Policy{Initial: retry.Immediate}, MaxRetryAfter: max}
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1/x", nil)
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 || len(rt.times) != 1 || time.Since(start) != 0 {
			t.Fatalf("status %d after %d sends in %v; want the 503 at once", resp.StatusCode, len(rt.times), time.Since(start))
		}
	})
}

// Item 5: the attempt count and the exhausted mark survive body wrappers
// (http.Client.Timeout) and a response rebuilt from status, header and
// body bytes, as generated clients' error values keep them.
func TestMarksSurviveWrappers(t *testing.T) {
	t.Run("gave up", func(t *testing.T) {
		_, srv := newScript(t, 503)
		c := client(t, &retryhttp.Transport{Policy: fast})
		c.Timeout = time.Minute // net/http wraps the body
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if retryhttp.Attempts(resp) != 4 || !retryhttp.Exhausted(resp) {
			t.Fatalf("Attempts %d Exhausted %v behind Client.Timeout", retryhttp.Attempts(resp), retryhttp.Exhausted(resp))
		}
		if resp.Header.Get(retryhttp.HeaderExhausted) != "1" || resp.Header.Get(retryhttp.HeaderAttempt) != "4" {
			t.Fatalf("header %v", resp.Header)
		}
		// What a generated client keeps in its error value.
		rebuilt := &http.Response{StatusCode: resp.StatusCode, Header: resp.Header.Clone(), Body: io.NopCloser(bytes.NewReader(body))}
		if retryhttp.Attempts(rebuilt) != 4 || !retryhttp.Exhausted(rebuilt) {
			t.Fatalf("rebuilt: Attempts %d Exhausted %v", retryhttp.Attempts(rebuilt), retryhttp.Exhausted(rebuilt))
		}
	})
	t.Run("succeeded after retries", func(t *testing.T) {
		_, srv := newScript(t, 503, 200)
		c := client(t, &retryhttp.Transport{Policy: fast})
		c.Timeout = time.Minute
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if retryhttp.Attempts(resp) != 2 || retryhttp.Exhausted(resp) {
			t.Fatalf("Attempts %d Exhausted %v", retryhttp.Attempts(resp), retryhttp.Exhausted(resp))
		}
	})
	t.Run("nested transports", func(t *testing.T) {
		s, srv := newScript(t, 503)
		base := &http.Transport{}
		t.Cleanup(base.CloseIdleConnections)
		inner := &retryhttp.Transport{Base: base, Policy: fast}
		c := &http.Client{Timeout: time.Minute, Transport: &retryhttp.Transport{Base: inner, Policy: fast}}
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if s.n() != 4 || retryhttp.Attempts(resp) != 4 || !retryhttp.Exhausted(resp) {
			t.Fatalf("%d sends, Attempts %d; want one layer's 4", s.n(), retryhttp.Attempts(resp))
		}
	})
	t.Run("first attempt untouched", func(t *testing.T) {
		_, srv := newScript(t, 404)
		c := client(t, &retryhttp.Transport{Policy: fast})
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if _, ok := resp.Header[retryhttp.HeaderAttempt]; ok || retryhttp.Attempts(resp) != 1 || retryhttp.Exhausted(resp) {
			t.Fatalf("header %v", resp.Header)
		}
	})
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

// Item 7: a request with a nil Header can be retried.
func TestNilHeaderRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		rt := &fakeRT{status: 503, retryAfter: func() string { return "0" }}
		tr := &retryhttp.Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			got = append(got, r.Header.Get(retryhttp.HeaderAttempt))
			return rt.RoundTrip(r)
		}), Policy: fast}
		u, _ := url.Parse("http://127.0.0.1/x")
		req := &http.Request{Method: "GET", URL: u} // Header nil
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.Join(got, ",") != ",2" || req.Header != nil {
			t.Fatalf("status %d, attempt headers %q, caller's header %v", resp.StatusCode, got, req.Header)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

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
		var done error
		p := fast
		p.Observer = retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			if e.Kind == retry.EventDone {
				done = e.Err
			}
		})
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
		if !errors.Is(done, errNoRewind) {
			t.Fatalf("the loop ended with %v; want it to wrap the GetBody error", done)
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

// opaqueCtx is a cancellable context that the context package does not
// recognise, so a child of it is watched by a goroutine until the child is
// cancelled: a child never cancelled shows up as a leaked goroutine.
type opaqueCtx struct{ done chan struct{} }

func (c *opaqueCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *opaqueCtx) Done() <-chan struct{}       { return c.done }
func (c *opaqueCtx) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}
func (c *opaqueCtx) Value(any) any { return nil }

// Item 9: a panic inside an attempt does not leave the attempt's context
// registered on the caller's.
func TestPanicInAttemptCancelsItsContext(t *testing.T) {
	ok := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 503, Body: io.NopCloser(strings.NewReader("x")), Request: r}, nil
	})
	for _, tc := range []struct {
		name string
		tr   *retryhttp.Transport
	}{
		{"in Base", &retryhttp.Transport{Policy: retry.Policy{AttemptTimeout: time.Hour},
			Base: roundTripFunc(func(*http.Request) (*http.Response, error) { panic("boom") })}},
		{"in RetryStatus", &retryhttp.Transport{Policy: retry.Policy{AttemptTimeout: time.Hour},
			Base: ok, RetryStatus: func(int) bool { panic("boom") }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			ctx := &opaqueCtx{done: make(chan struct{})}
			defer close(ctx.done)
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1/x", nil)
			func() {
				defer func() {
					if r := recover(); r != "boom" {
						t.Fatalf("recovered %v; want the panic to propagate", r)
					}
				}()
				tc.tr.RoundTrip(req)
			}()
			// An attempt context left registered on ctx is watched by a
			// goroutine until ctx ends, which it has not yet.
			goleak.VerifyNone(t, ignore)
		})
	}
}

// Issue 11: a success at the first attempt allocates nothing in the
// Transport, alone or under http.Client.
func TestSuccessAllocatesNothing(t *testing.T) {
	rt := &okRT{resp: http.Response{StatusCode: 200, Body: http.NoBody}}
	tr := &retryhttp.Transport{Base: rt}
	req, _ := http.NewRequest("GET", "http://127.0.0.1/", nil)
	if n := testing.AllocsPerRun(1000, func() { tr.RoundTrip(req) }); n != 0 {
		t.Errorf("RoundTrip: %v allocations; want 0", n)
	}
	do := func(c *http.Client) float64 {
		return testing.AllocsPerRun(1000, func() {
			resp, _ := c.Do(req)
			resp.Body.Close()
		})
	}
	if bare, with := do(&http.Client{Transport: rt}), do(&http.Client{Transport: tr}); with != bare {
		t.Errorf("http.Client.Do: %v allocations through the Transport, %v without", with, bare)
	}
}

// An invalid policy sends nothing, on the allocation-free path too, and
// the Transport does not remember a verdict across Transports.
func TestInvalidPolicySendsNothing(t *testing.T) {
	var n atomic.Int32
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n.Add(1)
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	})
	for _, p := range []retry.Policy{{Initial: -5}, {MaxAttempts: -7}, {Initial: time.Minute, MaxDelay: time.Second}} {
		tr := &retryhttp.Transport{Base: base, Policy: p}
		req, _ := http.NewRequest("GET", "http://127.0.0.1/x", nil)
		if _, err := tr.RoundTrip(req); !errors.Is(err, retry.ErrInvalidPolicy) || n.Load() != 0 {
			t.Fatalf("%+v: err %v after %d sends", p, err, n.Load())
		}
	}
	tr := &retryhttp.Transport{Base: base}
	req, _ := http.NewRequest("GET", "http://127.0.0.1/x", nil)
	if resp, err := tr.RoundTrip(req); err != nil || resp.StatusCode != 200 || n.Load() != 1 {
		t.Fatalf("valid policy: err %v after %d sends", err, n.Load())
	}
}

// A dial that times out sent nothing, and a response that took longer than
// the base's ResponseHeaderTimeout is a transient failure of an idempotent
// request: both are retried, though net and net/http report them as
// matching context.DeadlineExceeded, which retry.Do alone takes for the end
// of a context.
func TestTimeoutsMatchingContextRetried(t *testing.T) {
	_, dialErr := (&net.Dialer{Timeout: time.Nanosecond}).Dial("tcp", "127.0.0.1:1")
	if !errors.Is(dialErr, context.DeadlineExceeded) {
		t.Skipf("this platform's dial timeout (%v) does not match context.DeadlineExceeded", dialErr)
	}
	for _, method := range []string{"GET", "POST"} {
		n := 0
		tr := &retryhttp.Transport{
			Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if n++; n < 3 {
					return nil, &url.Error{Op: r.Method, URL: r.URL.String(), Err: dialErr}
				}
				return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
			}),
			Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 5},
		}
		req, _ := http.NewRequest(method, "http://127.0.0.1/", strings.NewReader("x"))
		resp, err := tr.RoundTrip(req)
		if err != nil || n != 3 {
			t.Fatalf("%s after two dial timeouts: %v after %d attempts; want success at attempt 3", method, err, n)
		}
		resp.Body.Close()
	}

	var calls atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			<-release // the first answer comes too late
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	defer close(release)
	base := &http.Transport{ResponseHeaderTimeout: 50 * time.Millisecond}
	defer base.CloseIdleConnections()
	c := &http.Client{Transport: &retryhttp.Transport{Base: base, Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}}}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("GET whose first answer outlasted ResponseHeaderTimeout: %v", err)
	}
	resp.Body.Close()
	if got := calls.Load(); got != 2 {
		t.Fatalf("server saw %d calls; want 2", got)
	}
}

// A Transport whose policy is plain but for an Observer makes the first
// attempt itself, as it does without one: the Observer sees the same
// events, in the same order, as when the loop makes every attempt (here
// forced by a time budget), each attempt once; and a success at the first
// attempt allocates nothing more than without an Observer.
func TestObservedFirstAttempt(t *testing.T) {
	type seen struct {
		kind     retry.EventKind
		attempt  int
		max      int
		hasErr   bool
		ctxIsReq bool
	}
	for _, statuses := range [][]int{{200}, {503, 200}, {503, 503, 404}, {503, 503, 503, 503}, {0, 200}, {0, 0, 0, 0}} {
		run := func(p retry.Policy) ([]seen, int) {
			var events []seen
			var reqCtx context.Context
			p.Observer = retry.ObserverFunc(func(ctx context.Context, e retry.Event) {
				events = append(events, seen{e.Kind, e.Attempt, e.MaxAttempts, e.Err != nil,
					ctx.Value(ctxKey{}) == reqCtx.Value(ctxKey{})})
			})
			n := 0
			tr := &retryhttp.Transport{Policy: p, Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				n++
				if s := statuses[min(n, len(statuses))-1]; s != 0 {
					return &http.Response{StatusCode: s, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
				}
				return nil, errors.New("connection reset")
			})}
			reqCtx = context.WithValue(t.Context(), ctxKey{}, new(int))
			req, _ := http.NewRequestWithContext(reqCtx, "GET", "http://127.0.0.1/x", nil)
			if resp, err := tr.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
			return events, n
		}
		fast, nFast := run(retry.Policy{Initial: retry.Immediate})
		slow, nSlow := run(retry.Policy{Initial: retry.Immediate, MaxElapsed: time.Hour})
		if !slices.Equal(fast, slow) || nFast != nSlow {
			t.Errorf("statuses %v: the observer saw\n%v (%d sends) on the first-attempt path,\n%v (%d sends) through the loop",
				statuses, fast, nFast, slow, nSlow)
		}
		for i, e := range fast {
			if e.kind == retry.EventAttempt && slices.ContainsFunc(fast[:i], func(f seen) bool { return f.kind == e.kind && f.attempt == e.attempt }) {
				t.Errorf("statuses %v: attempt %d reported twice: %v", statuses, e.attempt, fast)
			}
		}
	}

	rt := &okRT{resp: http.Response{StatusCode: 200, Body: http.NoBody}}
	var events int
	tr := &retryhttp.Transport{Base: rt, Policy: retry.Policy{Observer: retry.ObserverFunc(func(context.Context, retry.Event) { events++ })}}
	req, _ := http.NewRequest("GET", "http://127.0.0.1/", nil)
	if n := testing.AllocsPerRun(1000, func() { tr.RoundTrip(req) }); n != 0 {
		t.Errorf("RoundTrip with an Observer: %v allocations; want 0", n)
	}
	if events != 2*1001 {
		t.Errorf("%d events for 1001 calls; want an attempt and a done each", events)
	}
}

type ctxKey struct{}
