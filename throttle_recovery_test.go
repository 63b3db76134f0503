package retry_test

// The zero Throttle's targets (issue 34), in fake time through Allow and
// Record, as a new user would drive it: a demand of 100 attempts a second,
// 10 every 100 ms, each answered at once.

import (
	"context"
	"math"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/internal/defaults"
	"github.com/retrykit/retry/retrytest"
)

const demand = 100 // attempts a second

// driveThrottle offers th 100 attempts a second for secs seconds of the
// bubble's clock; backend(sec) is how many attempts the backend accepts in
// second sec (the first ones sent in it; the others it refuses as
// overloaded). It returns the attempts sent in each second.
func driveThrottle(th *retry.Throttle, secs int, backend func(sec int) int) []int {
	sent := make([]int, secs)
	for sec := range secs {
		capacity := backend(sec)
		for range 10 {
			for range demand / 10 {
				if !account.Allow(th) {
					continue
				}
				sent[sec]++
				account.Record(th, capacity > 0)
				capacity--
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return sent
}

// recoveredAfter returns the first second from which every second of sent
// has at least 95 % of the demand, or -1 if the last does not.
func recoveredAfter(sent []int) int {
	from := -1
	for i := len(sent) - 1; i >= 0 && sent[i] >= demand*95/100; i-- {
		from = i
	}
	return from
}

// TestThrottleRecoversAfterOutage: after a total outage of 1 s, 10 s,
// 5 min or 1 h, the zero Throttle sends at least 95 % of the demand within
// 10 s of the backend's recovery and keeps doing so for the next 2
// minutes; during an outage longer than the window it sends 10 % of the
// demand (the cap of 0.9 on the rejection probability), which is what
// sees the recovery.
func TestThrottleRecoversAfterOutage(t *testing.T) {
	const warm, after = 30, 120 // seconds before and after the outage
	for _, outage := range []int{1, 10, 300, 3600} {
		for _, zero := range []string{"zero Throttle", "NewThrottle(ThrottleConfig{})"} {
			t.Run((time.Duration(outage)*time.Second).String()+"/"+zero, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					th := new(retry.Throttle)
					if zero != "zero Throttle" {
						var err error
						if th, err = retry.NewThrottle(retry.ThrottleConfig{}); err != nil {
							t.Fatal(err)
						}
					}
					sent := driveThrottle(th, warm+outage+after, func(sec int) int {
						if sec >= warm && sec < warm+outage {
							return 0
						}
						return demand
					})
					rec := recoveredAfter(sent[warm+outage:])
					if rec < 0 || rec > 10 {
						t.Fatalf("sent per second after the outage %v: at 95 %% of demand from second %d, want ≤ 10", sent[warm+outage:][:20], rec)
					}
					t.Logf("at ≥ 95 %% of demand %d s after recovery; the first seconds: %v", rec, sent[warm+outage:][:12])
					if outage >= 60 {
						// The last 50 s of the outage: the cap's 10 %.
						probe := 0
						for _, n := range sent[warm+outage-50 : warm+outage] {
							probe += n
						}
						rate := float64(probe) / 50
						if sigma := math.Sqrt(50 * demand * 0.1 * 0.9); math.Abs(float64(probe)-50*demand*0.1) > 5*sigma {
							t.Fatalf("sent %.1f/s during the outage, want %v/s (10 %% of demand)", rate, demand*0.1)
						}
						t.Logf("probes during the outage: %.1f/s", rate)
					}
				})
			})
		}
	}
}

// TestThrottleRecoversAfterAnyOutage: the same target for every outage
// from 1 s to 1 min, second by second (the window's length is the hardest:
// the window is then full of failures sent before the rejection rose), and
// 2 and 10 minutes.
func TestThrottleRecoversAfterAnyOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		worst, at := 0, 0
		for outage := 1; outage <= 660; outage++ {
			if outage > 60 && outage != 120 && outage != 600 {
				continue
			}
			var th retry.Throttle
			sent := driveThrottle(&th, 20+outage+30, func(sec int) int {
				if sec >= 20 && sec < 20+outage {
					return 0
				}
				return demand
			})
			rec := recoveredAfter(sent[20+outage:])
			if rec < 0 || rec > 10 {
				t.Fatalf("after an outage of %d s: at 95 %% of demand from second %d, want ≤ 10 (%v)", outage, rec, sent[20+outage:])
			}
			if rec > worst {
				worst, at = rec, outage
			}
		}
		t.Logf("the slowest recovery: %d s, after an outage of %d s", worst, at)
	})
}

// TestThrottlePartialOverload: a backend that accepts C of the 100
// attempts a second: the zero Throttle sends at least C and at most 2·K·C
// (K 2), and in steady state what its rule gives: min(demand,
// max(√(demand·K·C), 10 % of demand)) within 10 %.
func TestThrottlePartialOverload(t *testing.T) {
	for _, accepted := range []int{20, 50, 90} {
		t.Run(strconv.Itoa(accepted)+"%", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var th retry.Throttle
				const secs, steady = 200, 60 // measured from second 60 on
				sent := driveThrottle(&th, secs, func(int) int { return accepted })
				total := 0
				for _, n := range sent[steady:] {
					total += n
				}
				rate := float64(total) / (secs - steady)
				k := defaults.ThrottleK
				c := float64(accepted)
				want := min(demand, max(math.Sqrt(demand*k*c), 0.1*demand))
				if rate < c || rate > 2*k*c || math.Abs(rate-want) > 0.1*want {
					t.Fatalf("backend accepting %d/s: sent %.1f/s, want %.1f (between C = %v and 2·K·C = %v)", accepted, rate, want, c, 2*k*c)
				}
				t.Logf("accepting %d/s: sent %.1f/s (√(R·K·C) = %.1f, K·C = %v)", accepted, rate, math.Sqrt(demand*k*c), k*c)
			})
		})
	}
}

// take returns the kinds of the events r recorded since the last take.
func take(r *retrytest.Recorder) []retry.EventKind {
	k := r.Kinds()
	r.Reset()
	return k
}

// TestThrottleEventsAndOverride: the Observer is told once when the
// Throttle starts rejecting and once when it stops, whether the rule or
// an override changed it; an override rejects every attempt or none until
// released, and Probability reports it.
func TestThrottleEventsAndOverride(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log retrytest.Recorder
		th, err := retry.NewThrottle(retry.ThrottleConfig{Observer: &log})
		if err != nil {
			t.Fatal(err)
		}
		up := func(int) int { return demand }
		driveThrottle(th, 5, up)
		if k := take(&log); len(k) != 0 || th.Probability() != 0 {
			t.Fatalf("healthy backend: events %v, p %v; want none, 0", k, th.Probability())
		}
		driveThrottle(th, 20, func(int) int { return 0 })
		if k := take(&log); !slices.Equal(k, []retry.EventKind{retry.EventThrottleStarted}) || th.Probability() != 0.9 {
			t.Fatalf("outage: events %v, p %v; want one throttle_started, 0.9", k, th.Probability())
		}
		driveThrottle(th, 20, up)
		if k := take(&log); !slices.Equal(k, []retry.EventKind{retry.EventThrottleStopped}) || th.Probability() != 0 {
			t.Fatalf("recovery: events %v, p %v; want one throttle_stopped, 0", k, th.Probability())
		}

		// Forced rejection: nothing sent, nothing counted, p 1.
		th.Override(retry.ThrottleRejectAll)
		before, _ := th.LocalCounts()
		if sent := driveThrottle(th, 3, up); sent[0]+sent[1]+sent[2] != 0 {
			t.Fatalf("ThrottleRejectAll let %v through", sent)
		}
		if after, _ := th.LocalCounts(); after != before || th.Probability() != 1 || th.Overridden() != retry.ThrottleRejectAll {
			t.Fatalf("ThrottleRejectAll: requests %d → %d, p %v, %v", before, after, th.Probability(), th.Overridden())
		}
		if k := take(&log); !slices.Equal(k, []retry.EventKind{retry.EventThrottleStarted}) {
			t.Fatalf("ThrottleRejectAll: events %v, want throttle_started", k)
		}
		// Released: the rule decides again (the backend is healthy).
		th.Override(retry.ThrottleAuto)
		if sent := driveThrottle(th, 1, up); sent[0] != demand {
			t.Fatalf("released: sent %d of %d", sent[0], demand)
		}
		if k := take(&log); !slices.Equal(k, []retry.EventKind{retry.EventThrottleStopped}) {
			t.Fatalf("released: events %v, want throttle_stopped", k)
		}
		// Forced through during an outage: all sent and counted, p 0.
		th.Override(retry.ThrottleAllowAll)
		if sent := driveThrottle(th, 20, func(int) int { return 0 }); sent[19] != demand {
			t.Fatalf("ThrottleAllowAll sent %d of %d", sent[19], demand)
		}
		if k := take(&log); len(k) != 0 || th.Probability() != 0 {
			t.Fatalf("ThrottleAllowAll: events %v, p %v; want none, 0", k, th.Probability())
		}
		th.Override(retry.ThrottleAuto)
		let := 0
		for range 1000 {
			if account.Allow(th) {
				let++
			}
		}
		if p := th.Probability(); p != 0.9 || let < 50 || let > 150 {
			t.Fatalf("released after the forced outage: p %v, %d of 1000 let through; want 0.9, about 100", p, let)
		}
		if k := take(&log); !slices.Equal(k, []retry.EventKind{retry.EventThrottleStarted}) {
			t.Fatalf("released after the forced outage: events %v, want throttle_started", k)
		}
	})
}

// The zero Throttle and a zero-valued ThrottleOverride release.
func TestThrottleOverrideZeroValues(t *testing.T) {
	var th retry.Throttle
	var o retry.ThrottleOverride
	th.Override(retry.ThrottleRejectAll)
	th.Override(o)
	if th.Overridden() != retry.ThrottleAuto || !account.Allow(&th) {
		t.Fatal("the zero ThrottleOverride did not release")
	}
	th.Override(retry.ThrottleOverride(99)) // unknown: treated as ThrottleAuto
	if th.Overridden() != retry.ThrottleAuto {
		t.Fatal("an unknown override was kept")
	}
}

// TestThrottleAsBreaker: the breaker of docs/storms.md, an Observer that
// forces rejection for 5 s whenever rejection starts. During a 60 s outage
// it sends nothing during the break, then the cap's probes (it is still
// rejecting, so it does not open again); after the outage it is back to
// 95 % of demand within 10 s.
func TestThrottleAsBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var th *retry.Throttle
		var opened atomic.Int32
		th, _ = retry.NewThrottle(retry.ThrottleConfig{
			Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
				if e.Kind == retry.EventThrottleStarted && th.Overridden() == retry.ThrottleAuto {
					opened.Add(1)
					th.Override(retry.ThrottleRejectAll)
					time.AfterFunc(5*time.Second, func() { th.Override(retry.ThrottleAuto) })
				}
			}),
		})
		sent := driveThrottle(th, 20+60+30, func(sec int) int {
			if sec >= 20 && sec < 80 {
				return 0
			}
			return demand
		})
		zero, total := 0, 0
		for _, n := range sent[20:80] {
			total += n
			if n == 0 {
				zero++
			}
		}
		if opened.Load() != 1 || zero < 4 || total == 0 {
			t.Fatalf("outage: opened %d times, %d silent seconds, %d sent: %v", opened.Load(), zero, total, sent[20:80])
		}
		if rec := recoveredAfter(sent[80:]); rec < 0 || rec > 10 {
			t.Fatalf("after the outage: at 95 %% of demand from second %d, want ≤ 10 (%v)", rec, sent[80:])
		}
		t.Logf("opened %d times; sent per second in the outage %v, after it %v", opened.Load(), sent[20:80], sent[80:92])
	})
}
