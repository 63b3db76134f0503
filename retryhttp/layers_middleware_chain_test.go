package retryhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

// A service behind Middleware bounds its outgoing call with a deadline (a
// child of r.Context()). The call is retried, and the deadline ends it while
// a retry is in flight: the Transport retried to exhaustion of its time, so
// the service's failing answer must carry Retry-Exhausted, as it does when
// the deadline is detected before a wait (ReasonDeadline) and as an inner
// retry.Do loop that retried and was cut short ends an outer one.
// Otherwise every caller above retries again and the chain multiplies.
func TestMiddlewareMarksCallRetriedUntilDeadline(t *testing.T) {
	down, sent := unavailableThenHang(t)
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	out := &http.Client{Transport: &retryhttp.Transport{Base: base,
		Policy: retry.Policy{Initial: time.Millisecond, MaxAttempts: 4, Jitter: retry.NoJitter()}}}
	var callErr atomic.Value
	resp := getThroughMiddleware(t, func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 150*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, down.URL, nil)
		resp, err := out.Do(req)
		if err != nil {
			callErr.Store(err)
			w.WriteHeader(http.StatusGatewayTimeout)
			return
		}
		resp.Body.Close()
	})
	if sent.Load() != 2 || resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("%d sends, status %d; want 2 sends and 504", sent.Load(), resp.StatusCode)
	}
	if !retryhttp.Exhausted(resp) {
		t.Fatalf("the service retried its call (2 sends) until its deadline (%v), but its 504 carries no %s: callers above retry it again",
			callErr.Load(), retryhttp.HeaderExhausted)
	}
}

// The same call cut by its deadline in its first and only attempt was not
// retried: nothing to mark.
func TestMiddlewareLeavesUnretriedDeadlineAlone(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer down.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	out := &http.Client{Transport: &retryhttp.Transport{Base: base, Policy: retry.Policy{Initial: time.Millisecond, MaxAttempts: 4}}}
	resp := getThroughMiddleware(t, func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 50*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, down.URL, nil)
		if resp, err := out.Do(req); err == nil {
			resp.Body.Close()
		}
		w.WriteHeader(http.StatusGatewayTimeout)
	})
	if retryhttp.Exhausted(resp) {
		t.Fatal("a call that was never retried marked the service's answer exhausted")
	}
}

// Under HTTP/2, net/http's ResponseWriter is an http.Pusher; Middleware must
// not hide it (it keeps Flusher, Hijacker and ReaderFrom).
func TestMiddlewareKeepsPusher(t *testing.T) {
	var plain, wrapped atomic.Bool
	for _, wrap := range []bool{false, true} {
		h := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, ok := w.(http.Pusher)
			if ok {
				// Go's client disables push: the real writer answers
				// ErrNotSupported, and so must the wrapper, reaching it.
				if err := p.Push("/x", nil); err != http.ErrNotSupported {
					t.Errorf("Push: %v", err)
				}
			}
			if wrap {
				wrapped.Store(ok)
			} else {
				plain.Store(ok)
			}
		}))
		if wrap {
			h = retryhttp.Middleware(h)
		}
		srv := httptest.NewUnstartedServer(h)
		srv.EnableHTTP2 = true
		srv.StartTLS()
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			srv.Close()
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("proto %s", resp.Proto)
		}
		srv.Client().CloseIdleConnections()
		srv.Close()
	}
	if plain.Load() && !wrapped.Load() {
		t.Fatal("Middleware hides the HTTP/2 ResponseWriter's http.Pusher")
	}
}

// unavailableThenHang starts a server that answers its first request 503
// and holds every later one until the client gives up; sent counts the
// requests. It is closed when t ends.
func unavailableThenHang(t *testing.T) (*httptest.Server, *atomic.Int32) {
	sent := new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sent.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv, sent
}

// getThroughMiddleware serves h behind Middleware on a loopback server,
// GETs it once, and returns the response, its body read and closed.
func getThroughMiddleware(t *testing.T, h http.HandlerFunc) *http.Response {
	t.Helper()
	srv := httptest.NewServer(retryhttp.Middleware(h))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}
