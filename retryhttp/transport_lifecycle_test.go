package retryhttp_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retrytest"
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
				var rec retrytest.Recorder
				rt := &slowRT{delay: func(int) time.Duration { return 0 }, status: func(int) int { return 503 }}
				tr := &retryhttp.Transport{Base: rt, MaxBufferedBody: limit,
					Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 4, Throttle: th, Observer: &rec}}
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
				if kinds := rec.Kinds(); len(kinds) < 2 || kinds[0] != retry.EventAttempt || kinds[len(kinds)-1] != retry.EventDone {
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

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
