package retryhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

// hedgeServer answers each request after stall(attempt), where attempt is
// the request's Retry-Attempt (1 without one), unless the client goes
// away first. It records what it saw.
type hedgeServer struct {
	stall func(attempt int) time.Duration
	code  func(attempt int) int

	mu       sync.Mutex
	bodies   []string
	attempts []int
	gone     atomic.Int32 // requests whose client went away before the answer
	finished atomic.Int32 // handlers that returned
}

// wait waits, for up to 5 s, until n handlers have returned.
func (s *hedgeServer) wait(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); int(s.finished.Load()) < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d handlers returned", s.finished.Load(), n)
		}
	}
}

func newHedgeServer(t *testing.T, stall func(int) time.Duration) (*hedgeServer, *httptest.Server) {
	return newHedgeServerCode(t, stall, func(int) int { return http.StatusOK })
}

func newHedgeServerCode(t *testing.T, stall func(int) time.Duration, code func(int) int) (*hedgeServer, *httptest.Server) {
	s := &hedgeServer{stall: stall, code: code}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer s.finished.Add(1)
		n := 1
		if v := r.Header.Get(retryhttp.HeaderAttempt); v != "" {
			n = int(v[0] - '0')
		}
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, string(b))
		s.attempts = append(s.attempts, n)
		s.mu.Unlock()
		select {
		case <-time.After(s.stall(n)):
		case <-r.Context().Done():
			s.gone.Add(1)
			return
		}
		w.WriteHeader(s.code(n))
		io.WriteString(w, "answer "+string(rune('0'+n)))
	}))
	t.Cleanup(srv.Close)
	return s, srv
}

func (s *hedgeServer) seen() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.attempts...)
}

func hedger(t *testing.T, d time.Duration, copies int) *retry.Hedger {
	t.Helper()
	h, err := retry.NewHedger(retry.HedgeConfig{FixedDelay: d, MaxCopies: copies})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func slowFirst(n int) time.Duration {
	if n == 1 {
		return 10 * time.Second
	}
	return 0
}

// The winner's answer reaches the caller with its attempt number, and the
// loser's request is cancelled at once. (A MaxConnsPerHost 1 transport is
// TestHedgeReleasesConnectionsMaxConnsPerHost1's.)
func TestHedgeGETWinnerAndLoser(t *testing.T) {
	s, srv := newHedgeServer(t, slowFirst)
	base := &http.Transport{MaxConnsPerHost: 2}
	defer base.CloseIdleConnections()
	tr := &retryhttp.Transport{Base: base, Hedge: hedger(t, 20*time.Millisecond, 2)}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "answer 2" || retryhttp.Attempts(resp) != 2 {
		t.Errorf("got %q, attempt %d; want the hedge's answer, attempt 2", b, retryhttp.Attempts(resp))
	}
	s.wait(t, 2) // the loser's handler saw its client go
	if s.gone.Load() != 1 {
		t.Errorf("%d requests abandoned, want 1 (the loser)", s.gone.Load())
	}
	if got := s.seen(); len(got) != 2 {
		t.Errorf("server saw attempts %v, want [1 2]", got)
	}
}

func TestHedgeReleasesConnectionsMaxConnsPerHost1(t *testing.T) {
	var first atomic.Bool
	s, srv := newHedgeServer(t, func(n int) time.Duration {
		if n == 1 && first.CompareAndSwap(false, true) {
			return 100 * time.Millisecond // the first call's first copy is slow
		}
		return 0
	})
	base := &http.Transport{MaxConnsPerHost: 1}
	defer base.CloseIdleConnections()
	tr := &retryhttp.Transport{Base: base, Hedge: hedger(t, 20*time.Millisecond, 2)}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for i := range 5 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("call %d: %v (a connection left taken?)", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if n := len(s.seen()); n < 5 || n > 6 {
		t.Errorf("server saw %d requests for 5 calls", n)
	}
}

// A POST without an idempotency key is never hedged: sent exactly once,
// however slow; with a key (and a replayable body) it is, whole each time.
func TestHedgePOST(t *testing.T) {
	s, srv := newHedgeServer(t, func(n int) time.Duration {
		if n == 1 {
			return 150 * time.Millisecond
		}
		return 0
	})
	tr := &retryhttp.Transport{Hedge: hedger(t, 10*time.Millisecond, 2), RetryNonIdempotent: true}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader("payload"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := s.seen(); len(got) != 1 {
		t.Fatalf("keyless POST: server saw attempts %v, want exactly one", got)
	}
	req, _ = http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader("payload"))
	req.Header.Set("Idempotency-Key", "k1")
	resp, err = tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s.wait(t, 3)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bodies) != 3 || s.bodies[1] != "payload" || s.bodies[2] != "payload" || retryhttp.Attempts(resp) != 2 {
		t.Errorf("keyed POST: bodies %q, winner attempt %d; want two whole copies, the hedge winning", s.bodies, retryhttp.Attempts(resp))
	}
}

// A body without GetBody is buffered and every copy sends it whole.
func TestHedgeBufferedBody(t *testing.T) {
	s, srv := newHedgeServer(t, slowFirst)
	tr := &retryhttp.Transport{Hedge: hedger(t, 10*time.Millisecond, 2)}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.URL, io.NopCloser(strings.NewReader("data")))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s.wait(t, 2)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bodies) != 2 || s.bodies[0] != "data" || s.bodies[1] != "data" {
		t.Errorf("bodies %q, want two whole copies", s.bodies)
	}
}

// The Budget's accounting equals the copies the server saw: with a reserve
// of exactly 3 retries and nothing earned, 6 calls that each want a hedge
// make 6 + 3 requests.
func TestHedgeBudgetBoundsCopies(t *testing.T) {
	s, srv := newHedgeServer(t, func(n int) time.Duration {
		if n == 1 {
			return 60 * time.Millisecond
		}
		return 0
	})
	b, err := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: 0.3, Window: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var refused, hedges atomic.Int32
	obs := retry.ObserverFunc(func(_ context.Context, e retry.Event) {
		switch e.Kind {
		case retry.EventHedgeRefused:
			refused.Add(1)
		case retry.EventHedge:
			hedges.Add(1)
		}
	})
	tr := &retryhttp.Transport{Policy: retry.Policy{Budget: b, Observer: obs}, Hedge: hedger(t, 10*time.Millisecond, 2)}
	defer tr.CloseIdleConnections()
	for range 6 {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	s.wait(t, 9)
	if got := len(s.seen()); got != 9 || hedges.Load() != 3 || refused.Load() != 3 {
		t.Errorf("server saw %d requests, %d hedges sent, %d refused; want 9, 3, 3", got, hedges.Load(), refused.Load())
	}
}

// The caller's cancel ends every copy at once.
func TestHedgeCallerCancel(t *testing.T) {
	s, srv := newHedgeServer(t, func(int) time.Duration { return 10 * time.Second })
	tr := &retryhttp.Transport{Hedge: hedger(t, 10*time.Millisecond, 3)}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	if resp != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("RoundTrip = %v, %v; want context.Canceled", resp, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned after %v", d)
	}
	s.wait(t, 3)
	if s.gone.Load() != 3 {
		t.Errorf("%d of %v requests abandoned, want all 3", s.gone.Load(), s.seen())
	}
}

// Every copy answering a retryable status: the last answer is returned,
// marked as given up on.
func TestHedgeAllCopiesFail(t *testing.T) {
	// The first copy answers 280 ms after the second: the margin keeps the
	// order on a loaded machine, where the second copy's 503 is drained and
	// judged after its round trip (10 ms was not enough at a load of 20).
	_, srv := newHedgeServerCode(t, func(n int) time.Duration {
		if n == 1 {
			return 300 * time.Millisecond
		}
		return 10 * time.Millisecond
	}, func(int) int { return http.StatusServiceUnavailable })
	tr := &retryhttp.Transport{Policy: retry.Policy{MaxAttempts: 2}, Hedge: hedger(t, 10*time.Millisecond, 2)}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !retryhttp.Exhausted(resp) || string(b) != "answer 1" {
		t.Errorf("got %d %q exhausted=%v; want the last 503 (the first copy's), marked", resp.StatusCode, b, retryhttp.Exhausted(resp))
	}
}

// closeRT answers every copy with a response whose body records its
// Close; the first copy answers only after the second has won, ignoring
// its cancelled context, so its response is that of a loser.
type closeRT struct {
	second chan struct{}
	closed [3]atomic.Bool
}

type closeBody struct {
	io.Reader
	closed *atomic.Bool
}

func (b *closeBody) Close() error { b.closed.Store(true); return nil }

func (rt *closeRT) RoundTrip(r *http.Request) (*http.Response, error) {
	n := 1
	if r.Header.Get(retryhttp.HeaderAttempt) == "2" {
		n = 2
		defer close(rt.second)
	} else {
		<-rt.second
		<-r.Context().Done()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{}, Request: r,
		Body: &closeBody{strings.NewReader("x"), &rt.closed[n]}}, nil
}

func TestHedgeLosersResponseClosed(t *testing.T) {
	rt := &closeRT{second: make(chan struct{})}
	tr := &retryhttp.Transport{Base: rt, Hedge: hedger(t, time.Millisecond, 2)}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://127.0.0.1:1/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if !rt.closed[1].Load() || rt.closed[2].Load() || retryhttp.Attempts(resp) != 2 {
		t.Errorf("loser closed %v, winner closed %v, attempt %d; want the loser's closed before RoundTrip returned, the winner's open",
			rt.closed[1].Load(), rt.closed[2].Load(), retryhttp.Attempts(resp))
	}
	resp.Body.Close()
}

// A hedge that fails fast with a retryable status does not beat the
// slower first copy's success.
func TestHedgeFastFailureLosesToSlowerSuccess(t *testing.T) {
	s, srv := newHedgeServerCode(t, func(n int) time.Duration {
		if n == 1 {
			return 80 * time.Millisecond
		}
		return 0
	}, func(n int) int {
		if n == 1 {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	tr := &retryhttp.Transport{Policy: retry.Policy{MaxAttempts: 3}, Hedge: hedger(t, 10*time.Millisecond, 2)}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s.wait(t, 3)
	if resp.StatusCode != 200 || string(b) != "answer 1" || retryhttp.Attempts(resp) != 1 {
		t.Errorf("got %d %q attempt %d; want the first copy's 200", resp.StatusCode, b, retryhttp.Attempts(resp))
	}
	// Copy 2's 503 at 10ms sent copy 3 at once, which failed too; the
	// first copy answered at 80ms.
	if got := s.seen(); len(got) != 3 {
		t.Errorf("server saw attempts %v, want 3", got)
	}
}

// AttemptTimeout bounds each copy up to its response headers: a copy that
// runs out of it is retried (the next copy goes at once), and the winner's
// body, which the server sends 100 ms after its headers, stays readable
// past the attempt's timeout and after RoundTrip returns.
func TestHedgeAttemptTimeout(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 3 {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(100 * time.Millisecond)
		io.WriteString(w, "late body")
	}))
	defer srv.Close()
	tr := &retryhttp.Transport{Policy: retry.Policy{AttemptTimeout: 50 * time.Millisecond, Initial: retry.Immediate},
		Hedge: hedger(t, 20*time.Millisecond, 2)}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "late body" || retryhttp.Attempts(resp) != 3 || n.Load() != 3 {
		t.Errorf("got %q (%v), attempt %d, %d requests; want the third copy's body, readable", b, err, retryhttp.Attempts(resp), n.Load())
	}
}
