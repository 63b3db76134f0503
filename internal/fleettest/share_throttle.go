package fleettest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/internal/redistest"
)

// ShareThrottleRecovers: two Throttles (window 2 s) share through the
// store, a third joins during a total outage of 4 s, and an unshared one
// runs beside them, each offered one attempt every 10 ms. During the
// outage every shared one, the late one included, still sends about 10 %
// of its demand (the cap; the late one is not locked out by the fleet's
// failures); after it, each is back to at least 95 % of its demand about
// as soon as the unshared one (within three sync intervals of it, give or take the 200 ms buckets it is measured in) and
// within the window.
func ShareThrottleRecovers(t *testing.T, dial Dialer) {
	srv := redistest.Start(t)
	const (
		window  = 2 * time.Second
		tick    = 10 * time.Millisecond
		bucket  = 200 * time.Millisecond
		healthy = 2 * time.Second
		outage  = 4 * time.Second
		join    = healthy + 2*time.Second // the third joins halfway through the outage
		after   = 3 * time.Second
	)
	cfg := retry.ThrottleConfig{Window: window}
	var ths [4]*retry.Throttle // 0, 1 shared from the start; 2 joins late; 3 unshared
	for i := range ths {
		ths[i], _ = retry.NewThrottle(cfg)
	}
	share := func(th *retry.Throttle) Share {
		s, err := dial(t, srv.Addr()).ShareThrottle("recover", th, ShareOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s0, s1 := share(ths[0]), share(ths[1])
	if !WaitFor(time.Second, func() bool { return s0.Shared() && s1.Shared() }) {
		t.Fatal("shares did not join")
	}

	var up atomic.Bool
	up.Store(true)
	nb := int((healthy + outage + after) / bucket)
	var offered, sent [4][]int
	for i := range ths {
		offered[i], sent[i] = make([]int, nb), make([]int, nb)
	}
	var s2 Share
	start := time.Now()
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for now := range tk.C {
		el := now.Sub(start)
		b := int(el / bucket)
		if b >= nb {
			break
		}
		up.Store(el < healthy || el >= healthy+outage)
		if s2 == nil && el >= join {
			s2 = share(ths[2])
		}
		for i, th := range ths {
			if i == 2 && el < join {
				continue
			}
			offered[i][b]++
			if account.Allow(th) {
				sent[i][b]++
				account.Record(th, up.Load())
			}
		}
	}

	// During the last second of the outage: the cap's 10 %.
	from, to := int((healthy+outage-time.Second)/bucket), int((healthy+outage)/bucket)
	for i := range 3 {
		o, s := 0, 0
		for b := from; b < to; b++ {
			o, s = o+offered[i][b], s+sent[i][b]
		}
		if f := float64(s) / float64(o); f < 0.02 || f > 0.25 {
			t.Errorf("throttle %d sent %d of %d attempts (%.0f %%) in the outage's last second, want about 10 %%", i, s, o, 100*f)
		}
	}
	// Recovery: the first bucket from which every bucket has ≥ 95 %.
	rec := func(i int) time.Duration {
		first := nb
		for b := nb - 1; b >= to && offered[i][b] > 0 && sent[i][b]*100 >= offered[i][b]*95; b-- {
			first = b
		}
		return time.Duration(first-to) * bucket
	}
	local := rec(3)
	for i := range 3 {
		r := rec(i)
		t.Logf("throttle %d: at ≥ 95 %% of demand %v after the recovery (unshared: %v); sent per 200 ms from the outage's last second: %v", i, r, local, sent[i][from:])
		// Three syncs to learn the fleet's accepts, plus a bucket of
		// measurement on each side (the 200 ms buckets round both times).
		if r > window || r > local+3*100*time.Millisecond+2*bucket {
			t.Errorf("shared throttle %d back to 95 %% of demand %v after the recovery, want within the window (%v) and at most 3 syncs and 2 buckets after the unshared one (%v)", i, r, window, local)
		}
	}
	if s, _, _ := s2.Counts(); s == 0 || !s2.Shared() {
		t.Errorf("the late throttle never synced")
	}
}
