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
	"go.uber.org/goleak"
)

type stallRT struct{}

func (stallRT) RoundTrip(r *http.Request) (*http.Response, error) {
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// retry.Do cuts an attempt with an AttemptTimeout short where
// MaxElapsed ends; the Transport promises its attempt timeout works
// "exactly as in retry.Do".
func TestTransportAttemptClippedByMaxElapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := retry.Policy{MaxElapsed: 2 * time.Second, AttemptTimeout: time.Hour, MaxAttempts: 3}
		tr := &retryhttp.Transport{Base: stallRT{}, Policy: p}
		req, _ := http.NewRequestWithContext(t.Context(), "GET", "http://example.invalid/", nil)
		start := time.Now()
		_, err := tr.RoundTrip(req)
		if took := time.Since(start); took > p.MaxElapsed {
			t.Fatalf("took %v with MaxElapsed %v (err %v)", took, p.MaxElapsed, err)
		}
	})
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
