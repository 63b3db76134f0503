package retryhttp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

var fast = retry.Policy{Initial: retry.Immediate, MaxAttempts: 4}

// script serves the statuses in order (the last one repeats) and records
// each request's body and attempt header.
type script struct {
	mu       sync.Mutex
	statuses []int
	header   http.Header
	bodies   []string
	attempts []string
	conns    atomic.Int32
}

func (s *script) n() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.bodies) }

func newScript(t *testing.T, statuses ...int) (*script, *httptest.Server) {
	s := &script{statuses: statuses}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		i := min(len(s.bodies), len(s.statuses)-1)
		s.bodies = append(s.bodies, string(b))
		s.attempts = append(s.attempts, r.Header.Get(retryhttp.HeaderAttempt))
		code := s.statuses[i]
		for k, v := range s.header {
			w.Header()[k] = v
		}
		s.mu.Unlock()
		w.WriteHeader(code)
		io.WriteString(w, "status "+http.StatusText(code))
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return s, srv
}

func client(t *testing.T, tr *retryhttp.Transport) *http.Client {
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	if tr.Base == nil {
		tr.Base = base
	}
	return &http.Client{Transport: tr}
}

func TestStatusSequence(t *testing.T) {
	s, srv := newScript(t, 503, 503, 200)
	c := client(t, &retryhttp.Transport{Policy: fast})
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "status OK" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if s.n() != 3 || retryhttp.Attempts(resp) != 3 {
		t.Fatalf("server saw %d, Attempts %d; want 3", s.n(), retryhttp.Attempts(resp))
	}
	if got := strings.Join(s.attempts, ","); got != ",2,3" {
		t.Fatalf("attempt headers %q", got)
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("%d connections; want 1 (reused across retries)", n)
	}
}

func TestNotRetried(t *testing.T) {
	for _, code := range []int{400, 404, 501, 505, 511} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			s, srv := newScript(t, code, 200)
			c := client(t, &retryhttp.Transport{Policy: fast})
			resp, err := c.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != code || s.n() != 1 {
				t.Fatalf("status %d after %d sends; want %d after 1", resp.StatusCode, s.n(), code)
			}
		})
	}
}

func TestGiveUpReturnsLastResponse(t *testing.T) {
	s, srv := newScript(t, 500, 502, 504, 503)
	s.header = http.Header{"X-Last": {"yes"}}
	c := client(t, &retryhttp.Transport{Policy: fast})
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || string(body) != "status Service Unavailable" || resp.Header.Get("X-Last") != "yes" {
		t.Fatalf("got %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if s.n() != 4 || retryhttp.Attempts(resp) != 4 || !retryhttp.Exhausted(resp) {
		t.Fatalf("sends %d attempts %d exhausted %v", s.n(), retryhttp.Attempts(resp), retryhttp.Exhausted(resp))
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("%d connections; want 1", n)
	}
}

func TestHostileRetryAfterReturnsAtOnce(t *testing.T) {
	s, srv := newScript(t, 503)
	s.header = http.Header{"Retry-After": {"99999999"}}
	c := client(t, &retryhttp.Transport{Policy: retry.Policy{MaxAttempts: 4}})
	start := time.Now()
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if d := time.Since(start); d > 2*time.Second || s.n() != 1 || resp.StatusCode != 503 {
		t.Fatalf("took %v, %d sends, status %d", d, s.n(), resp.StatusCode)
	}
}

func TestRetryAfterPastDeadlineReturnsAtOnce(t *testing.T) {
	s, srv := newScript(t, 429, 200)
	s.header = http.Header{"Retry-After": {"30"}}
	c := client(t, &retryhttp.Transport{Policy: fast})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s.n() != 1 || resp.StatusCode != 429 {
		t.Fatalf("%d sends, status %d", s.n(), resp.StatusCode)
	}
}

func TestPOST(t *testing.T) {
	t.Run("no key sent once", func(t *testing.T) {
		s, srv := newScript(t, 503, 200)
		c := client(t, &retryhttp.Transport{Policy: fast})
		resp, err := c.Post(srv.URL, "text/plain", strings.NewReader("hello"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if s.n() != 1 || resp.StatusCode != 503 {
			t.Fatalf("%d sends, status %d", s.n(), resp.StatusCode)
		}
	})
	t.Run("no key 429 retried", func(t *testing.T) {
		s, srv := newScript(t, 429, 200)
		c := client(t, &retryhttp.Transport{Policy: fast})
		resp, err := c.Post(srv.URL, "text/plain", strings.NewReader("hello"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if s.n() != 2 || resp.StatusCode != 200 {
			t.Fatalf("%d sends, status %d", s.n(), resp.StatusCode)
		}
	})
	for _, key := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
		t.Run(key, func(t *testing.T) {
			s, srv := newScript(t, 503, 503, 200)
			c := client(t, &retryhttp.Transport{Policy: fast})
			req, _ := http.NewRequest("POST", srv.URL, bytes.NewReader([]byte("payload-123")))
			req.Header.Set(key, "k1")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if s.n() != 3 || resp.StatusCode != 200 {
				t.Fatalf("%d sends, status %d", s.n(), resp.StatusCode)
			}
			for i, b := range s.bodies {
				if b != "payload-123" {
					t.Fatalf("body %d = %q", i, b)
				}
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

func TestCallerRequestNotMutated(t *testing.T) {
	_, srv := newScript(t, 503, 503, 200)
	c := client(t, &retryhttp.Transport{Policy: fast})
	req, _ := http.NewRequest("PUT", srv.URL+"/p?q=1", strings.NewReader("x"))
	req.Header.Set("A", "b")
	before := req.Header.Clone()
	u := *req.URL
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(req.Header) != len(before) || req.Header.Get("A") != "b" || req.Header.Get(retryhttp.HeaderAttempt) != "" || *req.URL != u {
		t.Fatalf("request changed: %v %v", req.Header, req.URL)
	}
}

func TestTransportErrors(t *testing.T) {
	// A closed listener: connection refused, a dial error, retried even
	// for POST.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var events []retry.Event
	p := fast
	p.Observer = retry.ObserverFunc(func(_ context.Context, e retry.Event) {
		if e.Kind == retry.EventRetry {
			events = append(events, e)
		}
	})
	c := client(t, &retryhttp.Transport{Policy: p})
	_, err = c.Post("http://user:secret@"+addr+"/x?token=abc", "text/plain", strings.NewReader("b"))
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 4 || re.Reason != retry.ReasonAttempts {
		t.Fatalf("err %v", err)
	}
	if len(events) != 3 {
		t.Fatalf("%d events", len(events))
	}
	msg := events[0].Err.Error()
	if !strings.Contains(msg, "POST") || !strings.Contains(msg, "token=xxx") || strings.Contains(msg, "secret") || strings.Contains(msg, "abc") || !strings.Contains(msg, "attempt 1") {
		t.Fatalf("event message %q", msg)
	}

	t.Run("unsupported scheme", func(t *testing.T) {
		c := client(t, &retryhttp.Transport{Policy: fast})
		_, err := c.Get("ftp://127.0.0.1/")
		if !errors.As(err, &re) || re.Attempts != 1 {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("tls certificate", func(t *testing.T) {
		var n atomic.Int32
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { n.Add(1) }))
		defer srv.Close()
		srv.Config.ErrorLog = nil
		c := client(t, &retryhttp.Transport{Policy: fast})
		_, err := c.Get(srv.URL)
		if !errors.As(err, &re) || re.Attempts != 1 {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("reset retried", func(t *testing.T) {
		var n atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) < 3 {
				conn, _, _ := http.NewResponseController(w).Hijack()
				conn.(*net.TCPConn).SetLinger(0)
				conn.Close()
				return
			}
			io.WriteString(w, "ok")
		}))
		defer srv.Close()
		c := client(t, &retryhttp.Transport{Policy: fast})
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if n.Load() != 3 {
			t.Fatalf("%d sends", n.Load())
		}
	})
}

func TestContextCancelDuringWait(t *testing.T) {
	s, srv := newScript(t, 503)
	c := client(t, &retryhttp.Transport{Policy: retry.Policy{Initial: time.Hour, MaxDelay: time.Hour}})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for s.n() == 0 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(5 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	_, err := c.Do(req)
	wg.Wait()
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second || s.n() != 1 {
		t.Fatalf("err %v after %v, %d sends", err, time.Since(start), s.n())
	}
}

func TestAttemptTimeout(t *testing.T) {
	var n atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		io.WriteString(w, strings.Repeat("x", 1000))
	}))
	defer srv.Close()
	defer close(release)
	p := fast
	p.AttemptTimeout = 50 * time.Millisecond
	c := client(t, &retryhttp.Transport{Policy: p})
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(80 * time.Millisecond) // past the attempt timeout: body still readable
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(b) != 1000 || n.Load() != 2 {
		t.Fatalf("read %d bytes, err %v, %d sends", len(b), err, n.Load())
	}
}

func TestRetryAfterOnTheWire(t *testing.T) {
	for _, v := range []string{"0", "Fri, 02 Jan 2004 03:04:05 GMT"} {
		t.Run(v, func(t *testing.T) {
			s, srv := newScript(t, 429, 200)
			s.header = http.Header{"Retry-After": {v}}
			c := client(t, &retryhttp.Transport{Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}})
			resp, err := c.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if s.n() != 2 || resp.StatusCode != 200 || s.conns.Load() != 1 {
				t.Fatalf("%d sends, status %d, %d conns", s.n(), resp.StatusCode, s.conns.Load())
			}
		})
	}
}

// The transport owns Retry-Attempt: a first attempt goes without the
// caller's (a proxy's copy of its inbound headers), a retry carries the
// transport's own, and the caller's request keeps its header.
func TestCallerAttemptHeaderNotSent(t *testing.T) {
	var mu sync.Mutex
	var seen [][]string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Values(retryhttp.HeaderAttempt))
		n := len(seen)
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	for _, p := range []retry.Policy{fast, {Initial: retry.Immediate, MaxElapsed: time.Hour}} {
		mu.Lock()
		seen = nil
		mu.Unlock()
		c := client(t, &retryhttp.Transport{Policy: p})
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set(retryhttp.HeaderAttempt, "3")
		req.Header.Set("X-Other", "kept")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		mu.Lock()
		if len(seen) != 2 || len(seen[0]) != 0 || !slices.Equal(seen[1], []string{"2"}) {
			t.Errorf("policy %+v: the server saw Retry-Attempt %q; want none, then 2", p, seen)
		}
		mu.Unlock()
		if got := req.Header.Get(retryhttp.HeaderAttempt); got != "3" || req.Header.Get("X-Other") != "kept" {
			t.Errorf("the caller's request was modified: Retry-Attempt %q", got)
		}
	}
}
