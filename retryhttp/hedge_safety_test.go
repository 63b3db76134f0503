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
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

// stallServer answers attempt 1 with headers of code1 and then a body it
// never finishes (it waits for the client to go, 10 s at most), and the
// other attempts with 200 "winner" once release is closed.
func stallServer(t *testing.T, code1 int, release <-chan struct{}) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(retryhttp.HeaderAttempt) == "" {
			w.WriteHeader(code1)
			io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "winner")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// hedgeWinsSoon GETs url through tr and fails the test unless RoundTrip
// returns within 3 s (a stalled body would hold it 10 s) with the hedge's
// answer.
func hedgeWinsSoon(t *testing.T, tr *retryhttp.Transport, url string) {
	t.Helper()
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	type result struct {
		resp *http.Response
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		ch <- result{resp, err}
	}()
	var resp *http.Response
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		resp = r.resp
	case <-time.After(3 * time.Second):
		t.Fatal("RoundTrip held by a loser's stalled body after the hedge won")
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "winner" || retryhttp.Attempts(resp) != 2 {
		t.Errorf("got %q attempt %d, want the hedge's answer", b, retryhttp.Attempts(resp))
	}
}

// A copy whose retryable answer (503) has a body the server stalls is
// reading that body when the hedge wins: it is a loser, cancelled at
// once, and RoundTrip returns the winner without waiting for the stall.
func TestHedgeLoserStalledRetryableBody(t *testing.T) {
	release := make(chan struct{})
	srv := stallServer(t, http.StatusServiceUnavailable, release)
	var once sync.Once
	tr := &retryhttp.Transport{Hedge: hedger(t, 10*time.Millisecond, 2),
		RetryStatus: func(code int) bool {
			if code == http.StatusServiceUnavailable {
				once.Do(func() { close(release) }) // the 503's headers are in: let the hedge answer
			}
			return retryhttp.DefaultRetryStatus(code)
		}}
	hedgeWinsSoon(t, tr, srv.URL)
}

// A copy whose success (203) arrives just as the hedge's success (200)
// wins, with a body the server stalls, is a loser: its response is closed
// without waiting for the stall.
func TestHedgeLoserStalledSuccessBody(t *testing.T) {
	release := make(chan struct{})
	srv := stallServer(t, http.StatusNonAuthoritativeInfo, release)
	won := make(chan struct{})
	obs := retry.ObserverFunc(func(_ context.Context, e retry.Event) {
		if e.Kind == retry.EventHedgeWon {
			close(won)
		}
	})
	var once sync.Once
	tr := &retryhttp.Transport{Hedge: hedger(t, 10*time.Millisecond, 2), Policy: retry.Policy{Observer: obs},
		RetryStatus: func(code int) bool {
			if code == http.StatusNonAuthoritativeInfo {
				// The first copy's success is in hand: let the hedge win
				// first, then hand this one back, a loser.
				once.Do(func() { close(release) })
				<-won
			}
			return retryhttp.DefaultRetryStatus(code)
		}}
	hedgeWinsSoon(t, tr, srv.URL)
}

// An Idempotency-Key header whose value is empty (or blank) is no key: a
// POST carrying only that is sent exactly once, neither hedged nor
// retried, whatever the server answers. A nil-valued key, net/http's way
// to mark a request idempotent without sending the header, still counts.
func TestHedgeEmptyIdempotencyKeySentOnce(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		value        []string
		want         int
	}{
		{"empty", "Idempotency-Key", []string{""}, 1},
		{"blank", "Idempotency-Key", []string{"  "}, 1},
		{"x-empty", "X-Idempotency-Key", []string{""}, 1},
		{"nil-valued", "Idempotency-Key", nil, 2},
		{"keyed", "Idempotency-Key", []string{"k1"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, srv := newHedgeServerCode(t, func(n int) time.Duration {
				if n == 1 {
					return 100 * time.Millisecond
				}
				return 0
			}, func(int) int { return http.StatusServiceUnavailable })
			tr := &retryhttp.Transport{Hedge: hedger(t, 10*time.Millisecond, 2),
				Policy: retry.Policy{MaxAttempts: 2, Initial: retry.Immediate}}
			defer tr.CloseIdleConnections()
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader("payload"))
			req.Header[tc.header] = tc.value
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			s.wait(t, tc.want)
			time.Sleep(50 * time.Millisecond) // a copy sent after all would reach the server now
			if got := s.seen(); len(got) != tc.want {
				t.Errorf("server saw attempts %v, want %d", got, tc.want)
			}
		})
	}
}

// Over one HTTP/2 connection (MaxConnsPerHost 1) the winner's large body,
// sent slowly, stays readable after RoundTrip returns, the loser's stream
// (stuck before its headers) reset; the calls that follow go through the
// same connection.
func TestHedgeHTTP2WinnerLargeSlowBody(t *testing.T) {
	const chunk, chunks = 64 << 10, 16 // 1 MiB, beyond HTTP/2's initial windows
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(retryhttp.HeaderAttempt) == "" {
			<-r.Context().Done() // the first copy never answers
			return
		}
		for range chunks {
			if _, err := w.Write(make([]byte, chunk)); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(2 * time.Millisecond)
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport).Clone()
	base.MaxConnsPerHost = 1
	defer base.CloseIdleConnections()
	tr := &retryhttp.Transport{Base: base, Hedge: hedger(t, 10*time.Millisecond, 2)}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 || err != nil || n != chunk*chunks || retryhttp.Attempts(resp) != 2 {
			t.Fatalf("call %d: %s, read %d bytes (%v), attempt %d; want HTTP/2, %d bytes from the hedge", i, resp.Proto, n, err, retryhttp.Attempts(resp), chunk*chunks)
		}
	}
}

// trailerRT is an in-memory Base: it reads each copy's body to its end,
// tracks how many copies are in it at once, and answers the first copy
// 503 after 50 ms, the others 200 at once.
type trailerRT struct {
	mu            sync.Mutex
	inFlight, max int
	trailers      []string
}

func (rt *trailerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	rt.inFlight++
	rt.max = max(rt.max, rt.inFlight)
	rt.mu.Unlock()
	defer func() {
		rt.mu.Lock()
		rt.inFlight--
		rt.mu.Unlock()
	}()
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	rt.mu.Lock()
	rt.trailers = append(rt.trailers, r.Trailer.Get("X-Checksum"))
	rt.mu.Unlock()
	code := http.StatusOK
	if r.Header.Get(retryhttp.HeaderAttempt) == "" {
		time.Sleep(50 * time.Millisecond)
		code = http.StatusServiceUnavailable
	}
	return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// A request with trailers is not hedged: a body may set their values as
// it is read (http.Request.Trailer), into the one map that every copy
// sends, which copies running at once would write and read together. It
// is retried one copy at a time, each sending the trailer.
func TestHedgeRequestWithTrailerNotHedged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &trailerRT{}
		tr := &retryhttp.Transport{Base: rt, Hedge: hedger(t, 10*time.Millisecond, 2),
			Policy: retry.Policy{Initial: retry.Immediate}}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, "http://127.0.0.1:1/", nil)
		req.Trailer = http.Header{"X-Checksum": nil}
		req.GetBody = func() (io.ReadCloser, error) {
			return &trailerBody{strings.NewReader("payload"), req.Trailer}, nil // sets X-Checksum: abc123 at EOF
		}
		req.Body, _ = req.GetBody()
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || rt.max != 1 || len(rt.trailers) != 2 || rt.trailers[0] != "abc123" || rt.trailers[1] != "abc123" {
			t.Errorf("status %d, %d copies at most at once, trailers %q; want 200, 1, [abc123 abc123]", resp.StatusCode, rt.max, rt.trailers)
		}
	})
}

// A hedge whose GetBody fails is a copy that could not be sent, not a
// fatal answer: the first copy, in flight, still wins with its slower
// success, and no further hedge is tried.
func TestHedgeGetBodyFailureDoesNotEndTheCall(t *testing.T) {
	s, srv := newHedgeServer(t, func(n int) time.Duration {
		if n == 1 {
			return 100 * time.Millisecond
		}
		return 0
	})
	tr := &retryhttp.Transport{Hedge: hedger(t, 10*time.Millisecond, 3)}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.URL, strings.NewReader("payload"))
	var calls atomic.Int32
	getBody := req.GetBody
	req.GetBody = func() (io.ReadCloser, error) {
		if calls.Add(1) > 1 {
			return nil, errors.New("test: cannot reopen the body")
		}
		return getBody()
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v; want the first copy's success", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "answer 1" || calls.Load() != 2 || len(s.seen()) != 1 {
		t.Errorf("got %q, GetBody called %d times, server saw %v; want answer 1, 2 calls, 1 request", b, calls.Load(), s.seen())
	}
}

// A body without GetBody larger than MaxBufferedBody cannot be replayed:
// the request is sent once, whole, however slow, and not hedged.
func TestHedgeBodyOverBufferSentOnce(t *testing.T) {
	s, srv := newHedgeServer(t, func(n int) time.Duration {
		if n == 1 {
			return 100 * time.Millisecond
		}
		return 0
	})
	tr := &retryhttp.Transport{Hedge: hedger(t, 10*time.Millisecond, 2), MaxBufferedBody: 4}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.URL, io.NopCloser(strings.NewReader("larger than four bytes")))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s.wait(t, 1)
	time.Sleep(50 * time.Millisecond) // a hedge sent after all would reach the server now
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bodies) != 1 || s.bodies[0] != "larger than four bytes" {
		t.Errorf("server saw bodies %q, want the whole body once", s.bodies)
	}
}

// Method names are case-sensitive (RFC 9110 9.1): "get", "Put" and
// "options" are not GET, PUT and OPTIONS, so not known to be idempotent:
// sent once, not hedged.
func TestHedgeOddCaseMethodSentOnce(t *testing.T) {
	for _, m := range []string{"get", "Put", "options"} {
		t.Run(m, func(t *testing.T) {
			s, srv := newHedgeServer(t, func(n int) time.Duration {
				if n == 1 {
					return 100 * time.Millisecond
				}
				return 0
			})
			tr := &retryhttp.Transport{Hedge: hedger(t, 10*time.Millisecond, 2)}
			defer tr.CloseIdleConnections()
			req, _ := http.NewRequestWithContext(t.Context(), m, srv.URL, nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			s.wait(t, 1)
			time.Sleep(50 * time.Millisecond) // a hedge sent after all would reach the server now
			if got := s.seen(); len(got) != 1 {
				t.Errorf("server saw attempts %v, want one", got)
			}
		})
	}
}
