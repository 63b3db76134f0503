package retryhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
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
						th.SetFleet(1<<62, 0) // the retry is rejected locally
					}
				})}
			tr := &retryhttp.Transport{Policy: p, MaxRetryAfter: -1}
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
