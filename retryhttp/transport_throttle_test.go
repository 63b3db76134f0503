package retryhttp_test

import (
	"net/http"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

// TestThrottleCountsOverload checks that 503 and 429 count as rejections for
// a retry.Throttle (the transport's status errors report Overloaded) while
// a 500 counts as accepted.
func TestThrottleCountsOverload(t *testing.T) {
	for _, tc := range []struct {
		code     int
		throttle bool
	}{{503, true}, {429, true}, {500, false}} {
		t.Run(http.StatusText(tc.code), func(t *testing.T) {
			th, err := retry.NewThrottle(retry.ThrottleConfig{})
			if err != nil {
				t.Fatal(err)
			}
			s, srv := newScript(t, tc.code)
			c := client(t, &retryhttp.Transport{Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 2, Throttle: th}})
			for range 100 {
				resp, err := c.Get(srv.URL)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode != tc.code {
						t.Fatalf("status %d", resp.StatusCode)
					}
				}
			}
			p := th.Probability()
			if tc.throttle && (p < 0.5 || s.n() >= 200) || !tc.throttle && (p != 0 || s.n() != 200) {
				t.Fatalf("rejection probability %.2f after %d sends", p, s.n())
			}
		})
	}
}
