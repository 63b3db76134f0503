package retryhttp_test

import (
	"context"
	"io"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"3", 3 * time.Second, true},
		{"120", 2 * time.Minute, true},
		{"9223372036", 9223372036 * time.Second, true},
		{"9223372037", math.MaxInt64, true},              // beyond a Duration: saturates
		{"99999999999999999999999", math.MaxInt64, true}, // far beyond
		{"Fri, 31 Dec 9999 23:59:59 GMT", math.MaxInt64, true},
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{" 3", 0, false},
		{"3s", 0, false},
		{"soon", 0, false},
		{"Fri, 02 Jan 2026 03:04:15 GMT", 10 * time.Second, true},  // IMF-fixdate
		{"Friday, 02-Jan-26 03:04:15 GMT", 10 * time.Second, true}, // RFC 850
		{"Fri Jan  2 03:04:15 2026", 10 * time.Second, true},       // asctime
		{"Fri, 02 Jan 2026 03:00:00 GMT", 0, true},                 // past
	} {
		got, ok := retryhttp.ParseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "3", "99999999", "9223372037", "Fri, 02 Jan 2026 03:04:15 GMT", "x", "-5"} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := retryhttp.ParseRetryAfter(s, now)
		if d < 0 || !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v", s, d, ok)
		}
		// Delta-seconds of any length are valid: too large saturates.
		if s != "" && strings.Trim(s, "0123456789") == "" && !ok {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v; want a saturated wait", s, d, ok)
		}
	})
}

// fakeRT answers in memory, inside a synctest bubble: first with the given
// status and Retry-After, then 200.
type fakeRT struct {
	status     int
	retryAfter func() string
	times      []time.Time
	n          atomic.Int32
}

func (f *fakeRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	f.times = append(f.times, time.Now())
	code, h := 200, http.Header{}
	if f.n.Add(1) == 1 {
		code = f.status
		h.Set("Retry-After", f.retryAfter())
	}
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Header: h,
		Body: io.NopCloser(strings.NewReader("b")), Request: r}, nil
}

func TestRetryAfterWaits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value func() string
		want  time.Duration
	}{
		{"seconds", func() string { return "3" }, 3 * time.Second},
		{"date", func() string { return time.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat) }, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := &fakeRT{status: 429, retryAfter: tc.value}
				tr := &retryhttp.Transport{Base: rt, Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}}
				req, _ := http.NewRequest("POST", "http://127.0.0.1/x", strings.NewReader("p"))
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 || len(rt.times) != 2 {
					t.Fatalf("status %d after %d sends", resp.StatusCode, len(rt.times))
				}
				wait := rt.times[1].Sub(rt.times[0])
				if maxJ := min(time.Second, tc.want/10); wait < tc.want || wait > tc.want+maxJ {
					t.Fatalf("waited %v; want %v..%v", wait, tc.want, tc.want+maxJ)
				}
			})
		})
	}
}

func TestRetryAfterAboveMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &fakeRT{status: 503, retryAfter: func() string { return "61" }}
		tr := &retryhttp.Transport{Base: rt, Policy: retry.Policy{Initial: retry.Immediate}, MaxServerWait: time.Minute}
		req, _ := http.NewRequest("GET", "http://127.0.0.1/x", nil)
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 || len(rt.times) != 1 || time.Since(start) != 0 {
			t.Fatalf("status %d, %d sends, %v", resp.StatusCode, len(rt.times), time.Since(start))
		}
	})
}

func TestRetryAfterBeyondDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &fakeRT{status: 503, retryAfter: func() string { return "20" }}
		tr := &retryhttp.Transport{Base: rt, Policy: retry.Policy{Initial: retry.Immediate}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1/x", nil)
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 || len(rt.times) != 1 || time.Since(start) != 0 {
			t.Fatalf("status %d, %d sends, %v", resp.StatusCode, len(rt.times), time.Since(start))
		}
	})
}

func TestHostileRetryAfterReturnsAtOnce(t *testing.T) {
	s, srv := newScript(t, 503)
	s.header = http.Header{"Retry-After": {"99999999"}}
	c := client(t, &retryhttp.Transport{Policy: retry.Policy{MaxAttempts: 4}})
	start := time.Now()
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if d := time.Since(start); d > 2*time.Second || s.n() != 1 || resp.StatusCode != 503 {
		t.Fatalf("took %v, %d sends, status %d", d, s.n(), resp.StatusCode)
	}
}

func TestRetryAfterPastDeadlineReturnsAtOnce(t *testing.T) {
	s, srv := newScript(t, 429, 200)
	s.header = http.Header{"Retry-After": {"30"}}
	c := client(t, &retryhttp.Transport{Policy: fast})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s.n() != 1 || resp.StatusCode != 429 {
		t.Fatalf("%d sends, status %d", s.n(), resp.StatusCode)
	}
}

func TestRetryAfterOnTheWire(t *testing.T) {
	for _, v := range []string{"0", "Fri, 02 Jan 2004 03:04:05 GMT"} {
		t.Run(v, func(t *testing.T) {
			s, srv := newScript(t, 429, 200)
			s.header = http.Header{"Retry-After": {v}}
			c := client(t, &retryhttp.Transport{Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}})
			resp, err := c.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if s.n() != 2 || resp.StatusCode != 200 || s.conns.Load() != 1 {
				t.Fatalf("%d sends, status %d, %d conns", s.n(), resp.StatusCode, s.conns.Load())
			}
		})
	}
}

// Item 4: a Retry-After beyond what a Duration holds is more than
// MaxServerWait; no sum wraps around to an early retry.
func TestRetryAfterOverflow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value string
		max   time.Duration
	}{
		{"seconds past Duration", "9223372037", 0},
		{"seconds far past Duration, huge max", "99999999999999999999", math.MaxInt64},
		{"seconds just inside Duration, huge max", "9223372036", math.MaxInt64},
		{"far-future date, huge max", "Fri, 31 Dec 9999 23:59:59 GMT", math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The jitter added to a wait just inside a Duration overflows
			// it only for some draws: try many.
			for range 100 {
				retryAfterOnce(t, tc.value, tc.max)
			}
		})
	}
}

func retryAfterOnce(t *testing.T, value string, max time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		rt := &fakeRT{status: 503, retryAfter: func() string { return value }}
		tr := &retryhttp.Transport{Base: rt, Policy: retry.Policy{Initial: retry.Immediate}, MaxServerWait: max}
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1/x", nil)
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 || len(rt.times) != 1 || time.Since(start) != 0 {
			t.Fatalf("status %d after %d sends in %v; want the 503 at once", resp.StatusCode, len(rt.times), time.Since(start))
		}
	})
}
