package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"
)

type overloadErr struct{}

func (overloadErr) Error() string    { return "overloaded" }
func (overloadErr) Overloaded() bool { return true }

func TestThrottleProbabilityFormula(t *testing.T) {
	for _, c := range []struct {
		cfg      ThrottleConfig
		req, acc int64
		want     float64
	}{
		{ThrottleConfig{}, 0, 0, 0},
		{ThrottleConfig{}, 100, 50, 0},
		{ThrottleConfig{}, 100, 60, 0},
		{ThrottleConfig{}, 1000, 250, 500.0 / 1001},
		{ThrottleConfig{}, 100, 0, 0.9}, // capped
		{ThrottleConfig{MaxProbability: 0.75}, 100, 0, 0.75},
		{ThrottleConfig{MaxProbability: 1}, 100, 0, 100.0 / 101},
		{ThrottleConfig{K: 1.1}, 1000, 500, 450.0 / 1001},
	} {
		th, _ := NewThrottle(c.cfg)
		th.w.a.Store(c.req)
		th.w.b.Store(c.acc)
		if got := th.Probability(); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%+v req=%d acc=%d: p=%v, want %v", c.cfg, c.req, c.acc, got, c.want)
		}
	}
}

// TestThrottleRejectsWithProbability: with p = 0.3 (requests 1e9, accepts
// 3.5e8, K 2), 100,000 decisions reject 30% ± 5σ (σ ≈ 0.00145). A
// rejection is counted as a request only with CountRejected.
func TestThrottleRejectsWithProbability(t *testing.T) {
	for _, countRejected := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			th, _ := NewThrottle(ThrottleConfig{CountRejected: countRejected})
			th.w.a.Store(1e9)
			th.w.b.Store(35e7)
			const n = 100000
			rejected := 0
			for range n {
				if !th.allow() {
					rejected++
				}
			}
			got, p := float64(rejected)/n, 0.3
			sigma := math.Sqrt(p * (1 - p) / n)
			if math.Abs(got-p) > 5*sigma {
				t.Fatalf("rejected %.4f of attempts, want %.2f ± %.4f", got, p, 5*sigma)
			}
			want := int64(0)
			if countRejected {
				want = int64(rejected)
			}
			if r := th.w.a.Load() - 1e9; r != want {
				t.Fatalf("CountRejected %v: requests grew by %d, want %d", countRejected, r, want)
			}
			th.w.a.Store(1e9)
			th.w.b.Store(5e8) // p = 0
			for range 10000 {
				if !th.allow() {
					t.Fatal("rejected at p = 0")
				}
			}
		})
	}
}

// TestThrottleCountRejectedConvergesToKTimesCapacity: a backend accepting
// 10 attempts per second from a client offering 100 per second: with
// CountRejected (the SRE book's rule) the throttle lets through about
// K × 10 = 20 per second and rejects the rest locally.
func TestThrottleCountRejectedConvergesToKTimesCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, _ := NewThrottle(ThrottleConfig{K: 2, Window: time.Minute, CountRejected: true})
		sent := 0
		for sec := range 300 {
			capacity := 10
			for range 100 {
				if !th.allow() {
					continue
				}
				if sec >= 120 {
					sent++
				}
				if capacity > 0 {
					capacity--
					th.record(nil)
				} else {
					th.record(fmt.Errorf("wrapped: %w", overloadErr{}))
				}
			}
			time.Sleep(time.Second)
		}
		perSec := float64(sent) / 180
		if perSec < 17 || perSec > 23 {
			t.Fatalf("sent %.1f attempts/s, want about 20 (K × capacity)", perSec)
		}
	})
}

func TestThrottleWindowForgets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, _ := NewThrottle(ThrottleConfig{Window: 10 * time.Second})
		for range 1000 {
			th.count(false)
		}
		if p := th.Probability(); p != 0.9 {
			t.Fatalf("after 1000 rejections p = %v, want the cap, 0.9", p)
		}
		time.Sleep(11 * time.Second)
		if p := th.Probability(); p != 0 { // reads the clock and moves the window
			t.Fatalf("a window later p = %v, want 0", p)
		}
	})
}

func TestThrottleAcceptedRule(t *testing.T) {
	custom := errors.New("custom reject")
	for _, c := range []struct {
		name     string
		cfg      ThrottleConfig
		err      error
		req, acc int64
	}{
		{"nil", ThrottleConfig{}, nil, 1, 1},
		{"generic", ThrottleConfig{}, errors.New("404"), 1, 1},
		{"overloaded", ThrottleConfig{}, overloadErr{}, 1, 0},
		{"wrapped overloaded", ThrottleConfig{}, fmt.Errorf("a: %w", errors.Join(errors.New("x"), overloadErr{})), 1, 0},
		{"attempt timeout", ThrottleConfig{}, fmt.Errorf("get: %w", context.DeadlineExceeded), 1, 0},
		{"locally throttled", ThrottleConfig{}, &Error{Err: ErrThrottled}, 0, 0},
		{"custom", ThrottleConfig{Accepted: func(err error) bool { return err != custom }}, custom, 1, 0},
		{"custom other", ThrottleConfig{Accepted: func(err error) bool { return err != custom }}, overloadErr{}, 1, 1},
	} {
		th, _ := NewThrottle(c.cfg)
		th.record(c.err)
		if r, a := th.w.a.Load(), th.w.b.Load(); r != c.req || a != c.acc {
			t.Errorf("%s: requests, accepts = %d, %d; want %d, %d", c.name, r, a, c.req, c.acc)
		}
	}
}

func TestNewThrottleErrors(t *testing.T) {
	for _, c := range []ThrottleConfig{{K: 0.5}, {K: -1}, {K: math.NaN()}, {K: math.Inf(1)}, {Window: -time.Second}, {Window: 10},
		{MaxProbability: -0.1}, {MaxProbability: 1.5}, {MaxProbability: math.NaN()}, {MaxProbability: math.Inf(1)}} {
		if _, err := NewThrottle(c); err == nil {
			t.Errorf("NewThrottle(%+v): no error", c)
		}
	}
}

func TestDoThrottledAttemptsSkipOp(t *testing.T) {
	th, _ := NewThrottle(ThrottleConfig{})
	th.Override(ThrottleRejectAll)
	calls := 0
	err := Do(context.Background(), Policy{Initial: Immediate, MaxAttempts: 3, Throttle: th}, func(context.Context) error {
		calls++
		return nil
	})
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrThrottled) || e.Attempts != 3 || e.Reason != ReasonAttempts {
		t.Fatalf("err = %v, want 3 throttled attempts", err)
	}
	if calls != 0 {
		t.Fatalf("op called %d times through a closed throttle", calls)
	}
}

func BenchmarkThrottleParallel(b *testing.B) {
	th := &Throttle{}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if th.allow() {
				th.record(nil)
			}
		}
	})
}
