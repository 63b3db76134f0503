package retryhttp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retrytest"
)

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

func TestTransportErrors(t *testing.T) {
	// A closed listener: connection refused, a dial error, retried even
	// for POST.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var rec retrytest.Recorder
	p := fast
	p.Observer = &rec
	c := client(t, &retryhttp.Transport{Policy: p})
	_, err = c.Post("http://user:secret@"+addr+"/x?token=abc", "text/plain", strings.NewReader("b"))
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 4 || re.Reason != retry.ReasonAttempts {
		t.Fatalf("err %v", err)
	}
	events := rec.Of(retry.EventRetry)
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
