package retrytest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retrytest"
)

// get sends a GET to url through a retrying client over rt and returns the
// status (0 on error) and the error.
func get(ctx context.Context, t *testing.T, rt http.RoundTripper, p retry.Policy, url string) (int, error) {
	t.Helper()
	c := &http.Client{Transport: &retryhttp.Transport{Base: rt, Policy: p}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func retryAfter(code int, v string) retrytest.Reply {
	return retrytest.Reply{Status: code, Header: http.Header{"Retry-After": {v}}}
}

// TestZeroPolicyInMilliseconds: the zero Policy (10 attempts, waits of 1,
// 2, 4, … up to 32 s) against a scripted 503, 503, 429 with Retry-After,
// 200 runs inside a synctest bubble in under 10 ms of wall time, and so
// does a call that uses all 10 attempts (2 min 39 s of waits at least).
// The best of three runs is asserted, as another process may take the CPU.
func TestZeroPolicyInMilliseconds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		script   []retrytest.Reply
		attempts int
		status   int
		minWait  time.Duration // the least virtual time the waits take
	}{
		{"503,503,429+Retry-After,200", []retrytest.Reply{{Status: 503}, {Status: 503}, retryAfter(429, "20"), {}}, 4, 200, 1*time.Second + 2*time.Second + 20*time.Second},
		{"10x503", []retrytest.Reply{{Status: 503}}, 10, 503, (1 + 2 + 4 + 8 + 16 + 32*4) * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			best := time.Hour
			for range 3 {
				start := time.Now()
				synctest.Test(t, func(t *testing.T) {
					b := retrytest.NewBackend(tc.script...)
					var rec retrytest.Recorder
					begin := time.Now()
					status, err := get(t.Context(), t, b, retry.Policy{Observer: &rec}, "http://svc.test/x")
					virtual := time.Since(begin)
					if err != nil || status != tc.status {
						t.Fatalf("got %d, %v; want %d", status, err, tc.status)
					}
					if got := b.Total(); got.Requests != tc.attempts {
						t.Fatalf("backend saw %d requests; want %d", got.Requests, tc.attempts)
					}
					if rec.Attempts() != tc.attempts || len(rec.Waits()) != tc.attempts-1 {
						t.Fatalf("recorded %s", &rec)
					}
					if virtual < tc.minWait {
						t.Fatalf("virtual time %v; want at least %v of waits", virtual, tc.minWait)
					}
				})
				best = min(best, time.Since(start))
			}
			t.Logf("best wall time of 3 runs: %v", best)
			if best >= 10*time.Millisecond {
				t.Fatalf("wall time %v; want under 10ms", best)
			}
		})
	}
}

// TestBackendScript: each call follows its own script, the last reply
// repeats, and requests and applications are counted per call.
func TestBackendScript(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := retrytest.NewBackend(retrytest.Reply{Status: 503}, retrytest.Reply{Body: "ok"})
		b.Script("GET http://svc.test/bad", retrytest.Reply{Status: 400})
		p := retry.Policy{MaxAttempts: 3}
		if s, err := get(t.Context(), t, b, p, "http://svc.test/a"); s != 200 || err != nil {
			t.Fatalf("a: %d, %v", s, err)
		}
		if s, err := get(t.Context(), t, b, p, "http://svc.test/a"); s != 200 || err != nil {
			t.Fatalf("a again: %d, %v", s, err)
		}
		if s, _ := get(t.Context(), t, b, p, "http://svc.test/bad"); s != 400 {
			t.Fatalf("bad: %d; want 400, not retried", s)
		}
		if got := b.Count("GET http://svc.test/a"); got != (retrytest.Count{Requests: 3, Applied: 2}) {
			t.Fatalf("call a: %+v; want 3 requests (503, 200, then 200 repeated), 2 applied", got)
		}
		if got := b.Count("GET http://svc.test/bad"); got != (retrytest.Count{Requests: 1}) {
			t.Fatalf("call bad: %+v", got)
		}
		if got := b.Total(); got != (retrytest.Count{Requests: 4, Applied: 2}) {
			t.Fatalf("total: %+v", got)
		}
		reqs := b.Requests()
		if len(reqs) != 4 || reqs[1].Attempt != 2 || reqs[1].Reply.Body != "ok" || reqs[1].Header.Get("Retry-Attempt") == "" {
			t.Fatalf("requests: %+v", reqs)
		}
		if got := b.Count("nothing"); got != (retrytest.Count{}) {
			t.Fatalf("unknown call: %+v", got)
		}
	})
}

// TestBackendLostReply: a lost reply is applied, then the client sees a
// connection reset; a scripted error is returned as it is and not applied.
func TestBackendLostReply(t *testing.T) {
	b := retrytest.NewBackend(retrytest.Reply{Lost: true}, retrytest.Reply{Err: errors.New("boom")})
	req := httptest.NewRequest(http.MethodPost, "http://svc.test/pay", strings.NewReader("x"))
	if _, err := b.RoundTrip(req); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("lost reply: %v; want a connection reset", err)
	}
	req = httptest.NewRequest(http.MethodPost, "http://svc.test/pay", strings.NewReader("x"))
	if _, err := b.RoundTrip(req); err == nil || err.Error() != "boom" {
		t.Fatalf("scripted error: %v", err)
	}
	if got := b.Total(); got != (retrytest.Count{Requests: 2, Applied: 1}) {
		t.Fatalf("total %+v; want 2 requests, 1 applied", got)
	}
	if string(b.Requests()[0].Body) != "x" {
		t.Fatalf("body not recorded: %q", b.Requests()[0].Body)
	}
}

// TestBackendLatency: a latency is waited on the clock; an attempt whose
// context ends first is not applied, and the retry after it is.
func TestBackendLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := retrytest.NewBackend(retrytest.Reply{Latency: time.Minute}, retrytest.Reply{Latency: time.Second})
		start := time.Now()
		p := retry.Policy{AttemptTimeout: 10 * time.Second, Jitter: retry.NoJitter()}
		if s, err := get(t.Context(), t, b, p, "http://svc.test/slow"); s != 200 || err != nil {
			t.Fatalf("%d, %v", s, err)
		}
		// 10 s cut short, 1 s wait, 1 s answer.
		if got := time.Since(start); got != 12*time.Second {
			t.Fatalf("took %v of virtual time; want 12s", got)
		}
		if got := b.Total(); got != (retrytest.Count{Requests: 2, Applied: 1}) {
			t.Fatalf("total %+v", got)
		}
	})
}

// TestBackendHandler: over a real connection, the same script answers;
// a lost reply resets the connection after applying.
func TestBackendHandler(t *testing.T) {
	b := retrytest.NewBackend(retryAfter(429, "0"), retrytest.Reply{Lost: true},
		retrytest.Reply{Err: errors.New("not sent")}, retrytest.Reply{Status: 201, Body: "made"})
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	c := srv.Client()
	c.Transport.(*http.Transport).DisableKeepAlives = true
	var got []string
	for range 4 {
		resp, err := c.Post(srv.URL+"/pay", "text/plain", strings.NewReader("x"))
		if err != nil {
			got = append(got, "error")
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got = append(got, resp.Status+" "+resp.Header.Get("Retry-After")+string(body))
	}
	if want := "429 Too Many Requests 0|error|error|201 Created made"; strings.Join(got, "|") != want {
		t.Fatalf("answers %q; want %q", strings.Join(got, "|"), want)
	}
	if got := b.Total(); got != (retrytest.Count{Requests: 4, Applied: 2}) {
		t.Fatalf("total %+v; want 4 requests, 2 applied (the lost reply and the 201)", got)
	}
}
