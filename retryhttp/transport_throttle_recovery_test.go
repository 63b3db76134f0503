package retryhttp_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

// TestThrottleRecoversOverLoopback: a real server on loopback answers 503
// to everything for 15 s, then 200 again; a client calls it through a
// retryhttp.Transport with the zero Throttle, 100 calls a second (no
// retries, so that every call is one attempt). During the outage the
// Throttle still sends about 10 % of the calls; after it, at least 95 % of
// the calls are sent again within 10 s, and stay so for 15 s. It takes
// about 32 s of wall time, so -short skips it.
func TestThrottleRecoversOverLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("32 s of real time: run without -short")
	}
	const (
		healthy = 2 * time.Second
		outage  = 15 * time.Second
		after   = 15 * time.Second
		tick    = 10 * time.Millisecond
	)
	var down atomic.Bool
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	var th retry.Throttle
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	client := &http.Client{Transport: &retryhttp.Transport{Base: base, Policy: retry.Policy{MaxAttempts: 1, Throttle: &th}}}

	secs := int((healthy + outage + after) / time.Second)
	offered, sent := make([]int, secs), make([]int, secs)
	var sentTotal int64
	start := time.Now()
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for now := range tk.C {
		el := now.Sub(start)
		sec := int(el / time.Second)
		if sec >= secs {
			break
		}
		down.Store(el >= healthy && el < healthy+outage)
		offered[sec]++
		resp, err := client.Get(srv.URL)
		switch {
		case errors.Is(err, retry.ErrThrottled):
		case err != nil:
			t.Fatal(err)
		default:
			resp.Body.Close()
			sent[sec]++
			sentTotal++
		}
	}
	if n := seen.Load(); n != sentTotal {
		t.Fatalf("the server saw %d requests, the client sent %d", n, sentTotal)
	}

	end := int((healthy + outage) / time.Second)
	o, s := 0, 0
	for i := end - 3; i < end; i++ {
		o, s = o+offered[i], s+sent[i]
	}
	if f := float64(s) / float64(o); f < 0.04 || f > 0.2 {
		t.Errorf("the outage's last 3 s: sent %d of %d calls (%.0f %%), want about 10 %%", s, o, 100*f)
	}
	rec := -1
	for i := secs - 1; i >= end && offered[i] > 0 && sent[i]*100 >= offered[i]*95; i-- {
		rec = i - end
	}
	t.Logf("outage probes %d of %d calls; at ≥ 95 %% of calls %d s after the recovery; sent/offered per second from the outage's last 3 s: %v / %v",
		s, o, rec, sent[end-3:], offered[end-3:])
	if rec < 0 || rec > 10 {
		t.Fatalf("at ≥ 95 %% of calls from second %d after the recovery, want ≤ 10", rec)
	}
}
