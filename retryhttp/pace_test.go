package retryhttp_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/fleetseam"
	"github.com/retrykit/retry/retryhttp"
)

// quotaRT is an in-memory server that enforces q requests per fixed
// window w on each partition (the request's X-User header) and says so
// in RateLimit fields on every answer: 200 with the quota left, or 429
// with r=0 once it is spent. t is the seconds until the window ends,
// rounded up. With pk, each answer carries the partition's pk.
type quotaRT struct {
	q   int
	w   time.Duration
	pk  bool
	mu  sync.Mutex
	win map[string]int64 // partition → its window's number
	n   map[string]int   // partition → requests in that window
	ok  int
	bad int // 429s
	at  []time.Time
}

func (s *quotaRT) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.win == nil {
		s.win, s.n = map[string]int64{}, map[string]int{}
	}
	now := time.Now()
	s.at = append(s.at, now)
	user := r.Header.Get("X-User")
	win := now.UnixNano() / int64(s.w)
	if s.win[user] != win {
		s.win[user], s.n[user] = win, 0
	}
	end := time.Unix(0, (win+1)*int64(s.w))
	t := int64(math.Ceil(end.Sub(now).Seconds()))
	code, left := 200, 0
	if s.n[user] < s.q {
		s.n[user]++
		left = s.q - s.n[user]
		s.ok++
	} else {
		code = 429
		s.bad++
	}
	item := `"default";r=` + strconv.Itoa(left) + `;t=` + strconv.FormatInt(t, 10)
	if s.pk {
		item += ";pk=:" + user + "=:"
	}
	h := http.Header{"Ratelimit-Policy": {`"default";q=` + strconv.Itoa(s.q) + `;w=` + strconv.Itoa(int(s.w/time.Second))}, "Ratelimit": {item}}
	return &http.Response{StatusCode: code, Status: strconv.Itoa(code) + " " + http.StatusText(code), Header: h,
		Body: io.NopCloser(strings.NewReader("b")), Request: r}, nil
}

func get(t *testing.T, tr http.RoundTripper, ctx context.Context, url, user string) (*http.Response, error) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if user != "" {
		req.Header.Set("X-User", user)
	}
	resp, err := tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	return resp, err
}

// TestPacerHoldsUntilReset: once a 200 says r=0, the next request to the
// host waits for the reset (the Observer sees an EventHeld naming the
// hint) and is not refused; a request to another host is not held.
func TestPacerHoldsUntilReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(time.Until(hintNow.Add(500 * time.Millisecond)))
		srv := &quotaRT{q: 2, w: 2 * time.Second}
		var held []string
		var delays []time.Duration
		tr := &retryhttp.Transport{Base: srv, Pace: &retryhttp.Pacer{}, Policy: retry.Policy{Initial: 10 * time.Millisecond,
			Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
				if h, ok := retryhttp.WaitHint(e); ok && e.Kind == retry.EventHeld {
					held, delays = append(held, h.String()), append(delays, e.Delay)
				}
			})}}
		for range 5 {
			if resp, err := get(t, tr, context.Background(), "http://127.0.0.1/x", ""); err != nil || resp.StatusCode != 200 {
				t.Fatalf("%v %v", resp, err)
			}
		}
		if srv.bad != 0 || len(srv.at) != 5 {
			t.Fatalf("%d refused, %d sent; want 0, 5", srv.bad, len(srv.at))
		}
		// Window [0 s, 2 s): two sent at 0.5 s, the second says r=0;t=2;
		// held until 2.5 s; two more, r=0;t=2 again (the window ends at
		// 4 s, 1.5 s away, rounded up); held until 4.5 s.
		want := []time.Duration{0, 0, 2 * time.Second, 2 * time.Second, 4 * time.Second}
		for i, at := range srv.at {
			if got := at.Sub(srv.at[0]); got != want[i] {
				t.Fatalf("request %d sent at +%v; want +%v (all: %v)", i+1, got, want[i], srv.at)
			}
		}
		if len(held) != 2 || held[0] != "RateLimit t=2" || delays[0] != 2*time.Second {
			t.Fatalf("EventHeld: %q %v", held, delays)
		}
		// Another host has its own quota.
		start := time.Now()
		get(t, tr, context.Background(), "http://127.0.0.1:81/x", "")
		if time.Since(start) != 0 {
			t.Fatalf("a request to another host waited %v", time.Since(start))
		}
	})
}

// TestPacerHoldOutsideAttemptTimeout: a hold comes before its attempt
// begins, so a hold longer than Policy.AttemptTimeout does not cut the
// attempt: it is sent once the hold ends, and answered in time. The
// Observer sees EventHeld before that attempt's EventAttempt.
func TestPacerHoldOutsideAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(time.Until(hintNow.Add(500 * time.Millisecond)))
		srv := &quotaRT{q: 2, w: 2 * time.Second}
		var kinds []retry.EventKind
		tr := &retryhttp.Transport{Base: srv, Pace: &retryhttp.Pacer{}, Policy: retry.Policy{AttemptTimeout: time.Second, MaxAttempts: 1,
			Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) { kinds = append(kinds, e.Kind) })}}
		for range 3 {
			if resp, err := get(t, tr, context.Background(), "http://127.0.0.1/x", ""); err != nil || resp.StatusCode != 200 {
				t.Fatalf("%v %v", resp, err)
			}
		}
		if len(srv.at) != 3 || srv.at[2].Sub(srv.at[0]) != 2*time.Second {
			t.Fatalf("sent at %v; want the third held 2 s, then sent", srv.at)
		}
		want := []retry.EventKind{retry.EventAttempt, retry.EventDone, retry.EventAttempt, retry.EventDone,
			retry.EventHeld, retry.EventAttempt, retry.EventDone}
		if !slices.Equal(kinds, want) {
			t.Fatalf("events %v; want %v", kinds, want)
		}
	})
}

// TestPacerHoldTooLong: a hold that would end past the request's deadline
// or Policy.MaxElapsed is not waited: the request is not sent and the
// error matches retry.ErrNotSent; a context cancelled during a hold ends
// it with its error.
func TestPacerHoldTooLong(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy retry.Policy
		ctx    func() (context.Context, context.CancelFunc)
		want   error
		after  time.Duration // when the call returns
	}{
		{"deadline", retry.Policy{}, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Second)
		}, retry.ErrNotSent, 0},
		{"MaxElapsed", retry.Policy{MaxElapsed: time.Second}, func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, retry.ErrNotSent, 0},
		{"cancelled during the hold", retry.Policy{}, func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(700*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled, 700 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				time.Sleep(time.Until(hintNow))
				srv := &quotaRT{q: 1, w: 10 * time.Second}
				tr := &retryhttp.Transport{Base: srv, Pace: &retryhttp.Pacer{}, Policy: tc.policy}
				get(t, tr, context.Background(), "http://127.0.0.1/x", "") // r=0;t=10
				ctx, cancel := tc.ctx()
				defer cancel()
				start := time.Now()
				resp, err := get(t, tr, ctx, "http://127.0.0.1/x", "")
				var he *retryhttp.HoldError
				if resp != nil || !errors.Is(err, tc.want) || !errors.Is(err, retry.ErrNotSent) || !errors.As(err, &he) || he.Hint.String() != "RateLimit t=10" {
					t.Fatalf("got %v, %v; want a HoldError matching %v", resp, err, tc.want)
				}
				if time.Since(start) != tc.after || len(srv.at) != 1 {
					t.Fatalf("returned after %v with %d sent", time.Since(start), len(srv.at))
				}
			})
		})
	}
}

// TestPacerPartitions: a server's pk scopes the hold to the partition
// whose responses carried it; without Partition, one host is one
// partition.
func TestPacerPartitions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pk        bool
		partition func(*http.Request) string
		bHeld     bool
	}{
		{"pk and Partition", true, func(r *http.Request) string { return r.Header.Get("X-User") }, false},
		{"Partition without pk", false, func(r *http.Request) string { return r.Header.Get("X-User") }, false},
		{"pk without Partition", true, nil, true},
		{"neither", false, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				time.Sleep(time.Until(hintNow))
				srv := &quotaRT{q: 1, w: 5 * time.Second, pk: tc.pk}
				tr := &retryhttp.Transport{Base: srv, Pace: &retryhttp.Pacer{Partition: tc.partition}}
				get(t, tr, context.Background(), "http://127.0.0.1/x", "YQ") // a's quota spent
				start := time.Now()
				get(t, tr, context.Background(), "http://127.0.0.1/x", "Yg")
				if held := time.Since(start) != 0; held != tc.bHeld {
					t.Fatalf("b held %v (%v); want held %v", held, time.Since(start), tc.bHeld)
				}
				start = time.Now()
				get(t, tr, context.Background(), "http://127.0.0.1/x", "YQ")
				if time.Since(start) != 5*time.Second || srv.bad != 0 {
					t.Fatalf("a held %v, %d refused; want 5s, 0", time.Since(start), srv.bad)
				}
			})
		})
	}
}

// TestPacerCaps: a reset longer than MaxServerWait sets no hold; nor does
// any with MaxServerWait < 0; nor Retry-After alone.
func TestPacerCaps(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  time.Duration
		h    http.Header
	}{
		{"over MaxServerWait", time.Minute, header("RateLimit", `"d";r=0;t=61`)},
		{"hints ignored", -1, header("RateLimit", `"d";r=0;t=2`)},
		{"Retry-After is about one request", 0, header("Retry-After", "2")},
		{"quota left", 0, header("RateLimit", `"d";r=1;t=2`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := &hintRT{status: 200, h: func() http.Header { return tc.h }}
				tr := &retryhttp.Transport{Base: rt, Pace: &retryhttp.Pacer{}, MaxServerWait: tc.max}
				get(t, tr, context.Background(), "http://127.0.0.1/x", "")
				start := time.Now()
				get(t, tr, context.Background(), "http://127.0.0.1/x", "")
				if time.Since(start) != 0 {
					t.Fatalf("held %v", time.Since(start))
				}
			})
		})
	}
}

// TestPacerQuota: the same work (30 requests, one after another) against
// a server enforcing 5 per second, with a policy whose own waits are
// 10-20 ms: with pacing none is refused; without, the first request past
// each window's quota is (its retry waits for the RateLimit hint).
func TestPacerQuota(t *testing.T) {
	run := func(p *retryhttp.Pacer) (refused int) {
		synctest.Test(t, func(t *testing.T) {
			time.Sleep(time.Until(hintNow.Add(300 * time.Millisecond)))
			srv := &quotaRT{q: 5, w: time.Second}
			tr := &retryhttp.Transport{Base: srv, Pace: p,
				Policy: retry.Policy{Initial: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}}
			for range 30 {
				if resp, err := get(t, tr, context.Background(), "http://127.0.0.1/x", ""); err != nil || resp.StatusCode != 200 {
					t.Fatalf("%v %v", resp, err)
				}
			}
			refused = srv.bad
		})
		return refused
	}
	paced, unpaced := run(&retryhttp.Pacer{}), run(nil)
	t.Logf("429s: %d with pacing, %d without", paced, unpaced)
	if paced != 0 || unpaced == 0 {
		t.Fatalf("429s: %d with pacing, %d without; want 0 and some", paced, unpaced)
	}
}

// TestPacerNoAllocs: with a Pacer, a success whose response carries no
// pacing field, or quota left, allocates nothing.
func TestPacerNoAllocs(t *testing.T) {
	for _, h := range []http.Header{
		{},
		header("Content-Type", "text/plain", "Date", "Mon, 07 Dec 2026 08:00:00 GMT"),
		header("RateLimit", `"default";r=4;t=1`, "X-RateLimit-Remaining", "4", "X-RateLimit-Reset", "1765094403"),
	} {
		rt := &okRT{resp: http.Response{StatusCode: 200, Body: http.NoBody, Header: h}}
		tr := &retryhttp.Transport{Base: rt, Pace: &retryhttp.Pacer{}}
		req, _ := http.NewRequest("GET", "http://127.0.0.1/", nil)
		if n := testing.AllocsPerRun(100, func() { tr.RoundTrip(req) }); n != 0 {
			t.Errorf("%v: %v allocations; want 0", h, n)
		}
	}
}

// TestPacerHedged: a hedged request's copies are held as any request is.
func TestPacerHedged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(time.Until(hintNow))
		h, err := retry.NewHedger(retry.HedgeConfig{FixedDelay: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		srv := &quotaRT{q: 1, w: 3 * time.Second}
		tr := &retryhttp.Transport{Base: srv, Pace: &retryhttp.Pacer{}, Hedge: h}
		get(t, tr, context.Background(), "http://127.0.0.1/x", "") // r=0;t=3
		start := time.Now()
		if resp, err := get(t, tr, context.Background(), "http://127.0.0.1/x", ""); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		if time.Since(start) != 3*time.Second || srv.bad != 0 {
			t.Fatalf("held %v, %d refused; want 3s, 0", time.Since(start), srv.bad)
		}
	})
}

// TestPacerHeldNotSentNotCounted: a request the Pacer does not send (its
// hold would end past Policy.MaxElapsed) is an attempt the Throttle does
// not count: it was neither accepted nor refused by the server.
func TestPacerHeldNotSentNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(time.Until(hintNow))
		var th retry.Throttle
		srv := &quotaRT{q: 1, w: time.Minute}
		tr := &retryhttp.Transport{Base: srv, Pace: &retryhttp.Pacer{}, Policy: retry.Policy{MaxElapsed: time.Second, Throttle: &th}}
		if _, err := get(t, tr, context.Background(), "http://127.0.0.1/x", ""); err != nil { // r=0
			t.Fatal(err)
		}
		counts := fleetseam.ThrottleOf[*retry.Throttle]().LocalCounts
		r0, a0 := counts(&th)
		_, err := get(t, tr, context.Background(), "http://127.0.0.1/x", "")
		if !errors.Is(err, retry.ErrNotSent) || srv.ok+srv.bad != 1 {
			t.Fatalf("%v after %d requests; want not sent, 1 request", err, srv.ok+srv.bad)
		}
		if r, a := counts(&th); r != r0 || a != a0 {
			t.Fatalf("Throttle counted %d requests, %d accepts; want %d, %d (the held request was not sent)", r, a, r0, a0)
		}
	})
}
