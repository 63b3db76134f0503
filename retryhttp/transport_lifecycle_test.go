package retryhttp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

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

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
