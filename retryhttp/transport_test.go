package retryhttp_test

import (
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
		if _, err := tr.RoundTrip(req); !errors.Is(err, retry.ErrInvalidPolicy) || !strings.HasPrefix(err.Error(), "retryhttp: ") || n.Load() != 0 {
			t.Fatalf("%+v: err %v after %d sends", p, err, n.Load())
		}
		if err := tr.Validate(); !errors.Is(err, retry.ErrInvalidPolicy) || !strings.HasPrefix(err.Error(), "retryhttp: ") {
			t.Errorf("%+v: Validate: %v", p, err)
		}
		if c, err := retryhttp.NewClient(p); c != nil || !errors.Is(err, retry.ErrInvalidPolicy) || !strings.HasPrefix(err.Error(), "retryhttp: ") {
			t.Errorf("%+v: NewClient: %v, %v", p, c, err)
		}
		// A body is closed, as the RoundTripper contract asks, and not read.
		body := &closeCounter{Reader: strings.NewReader("payload")}
		req, _ = http.NewRequest("PUT", "http://127.0.0.1/x", body)
		if _, err := tr.RoundTrip(req); !errors.Is(err, retry.ErrInvalidPolicy) || body.closed != 1 || body.read != 0 {
			t.Errorf("%+v: with a body: err %v, closed %d times, read %d times", p, err, body.closed, body.read)
		}
	}
	tr := &retryhttp.Transport{Base: base}
	if err := tr.Validate(); err != nil {
		t.Errorf("zero Transport: Validate: %v", err)
	}
	req, _ := http.NewRequest("GET", "http://127.0.0.1/x", nil)
	if resp, err := tr.RoundTrip(req); err != nil || resp.StatusCode != 200 || n.Load() != 1 {
		t.Fatalf("valid policy: err %v after %d sends", err, n.Load())
	}
	if c, err := retryhttp.NewClient(retry.Policy{}); err != nil || c == nil {
		t.Fatalf("NewClient(Policy{}): %v, %v", c, err)
	}
}

// closeCounter is a request body that counts its reads and closes.
type closeCounter struct {
	io.Reader
	read, closed int
}

func (c *closeCounter) Read(b []byte) (int, error) { c.read++; return c.Reader.Read(b) }
func (c *closeCounter) Close() error               { c.closed++; return nil }

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
