package retry

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

func TestBudgetFleet(t *testing.T) {
	cfg := BudgetConfig{Ratio: 0.5, MinPerSecond: 1, Window: 10 * time.Second} // reserve 10
	t.Run("local unchanged", func(t *testing.T) {
		b, _ := NewBudget(cfg)
		if got := grants(b, 100); got != 10 {
			t.Fatalf("local budget granted %d, want the reserve 10", got)
		}
	})
	t.Run("fleet retries use the shared reserve", func(t *testing.T) {
		b, _ := NewBudget(cfg)
		b.SetFleet(0, 7, 100)
		if got := grants(b, 100); got != 3 {
			t.Fatalf("granted %d with 7 fleet retries, want 3", got)
		}
	})
	t.Run("fleet first attempts earn", func(t *testing.T) {
		b, _ := NewBudget(cfg)
		b.SetFleet(20, 0, 100) // 0.5 × 20 = 10 more
		if got := grants(b, 100); got != 20 {
			t.Fatalf("granted %d, want 20", got)
		}
	})
	t.Run("negative fleet counts are zero", func(t *testing.T) {
		b, _ := NewBudget(cfg)
		b.SetFleet(-5, -5, 100)
		if got := grants(b, 100); got != 10 {
			t.Fatalf("granted %d, want 10", got)
		}
	})
	t.Run("allowance bounds the slack between syncs", func(t *testing.T) {
		b, _ := NewBudget(cfg)
		b.SetFleet(0, 0, 2)
		if got := grants(b, 100); got != 2 {
			t.Fatalf("granted %d before the next sync, want the allowance 2", got)
		}
		// Own first attempts earn Ratio each, even between syncs.
		for range 4 {
			b.RecordAttempt()
		}
		if got := grants(b, 100); got != 2 {
			t.Fatalf("granted %d after 4 first attempts, want 0.5 × 4 = 2", got)
		}
		// The next sync reports this process's 4 retries back as not the
		// fleet's (the engine subtracts its own); the cap still counts
		// from the next-to-last sync.
		b.SetFleet(0, 0, 2)
		if got := grants(b, 100); got != 0 {
			t.Fatalf("granted %d one sync later, want 0 (4 of 2+2 used since the next-to-last sync)", got)
		}
		b.SetFleet(0, 0, 2)
		if got := grants(b, 100); got != 2 {
			t.Fatalf("granted %d two syncs later, want 2", got)
		}
	})
	t.Run("NaN allowance is zero", func(t *testing.T) {
		b, _ := NewBudget(cfg)
		b.SetFleet(0, 0, math.NaN())
		if got := grants(b, 100); got != 0 {
			t.Fatalf("granted %d, want 0", got)
		}
	})
	t.Run("clear restores the local budget", func(t *testing.T) {
		b, _ := NewBudget(cfg)
		b.SetFleet(0, 100, 100)
		if grants(b, 100) != 0 {
			t.Fatal("granted with the fleet reserve spent")
		}
		b.ClearFleet()
		if got := grants(b, 100); got != 10 {
			t.Fatalf("granted %d after ClearFleet, want 10", got)
		}
	})
	t.Run("zero budget", func(t *testing.T) {
		var b Budget
		b.SetFleet(0, 8, 100)
		if got := grants(&b, 100); got != 2 {
			t.Fatalf("zero Budget granted %d, want 10-8", got)
		}
	})
	t.Run("local counts", func(t *testing.T) {
		b, _ := NewBudget(cfg)
		for range 3 {
			b.RecordAttempt()
		}
		grants(b, 2)
		if a, r := b.LocalCounts(); a != 3 || r != 2 {
			t.Fatalf("LocalCounts = %d, %d; want 3, 2", a, r)
		}
	})
}

func TestBudgetConfigResolved(t *testing.T) {
	var zero Budget
	if got := zero.Config(); got != (BudgetConfig{Ratio: 0.1, MinPerSecond: 1, Window: 10 * time.Second}) {
		t.Fatalf("zero Budget Config = %+v", got)
	}
	b, _ := NewBudget(BudgetConfig{Ratio: -1, MinPerSecond: 2.5, Window: 3 * time.Second})
	if got := b.Config(); got.Ratio != -1 || math.Abs(got.MinPerSecond-2.5) > 1e-9 || got.Window != 3*time.Second {
		t.Fatalf("Config = %+v", got)
	}
	b, _ = NewBudget(BudgetConfig{Ratio: 0.3, MinPerSecond: -2})
	if got := b.Config(); got.Ratio != 0.3 || got.MinPerSecond != -1 || got.Window != 10*time.Second {
		t.Fatalf("Config = %+v", got)
	}
	var zt Throttle
	if got := zt.Config(); got.K != 2 || got.Window != 2*time.Minute || got.Accepted != nil {
		t.Fatalf("zero Throttle Config = %+v", got)
	}
	th, _ := NewThrottle(ThrottleConfig{K: 1.5, Window: time.Second})
	if got := th.Config(); got.K != 1.5 || got.Window != time.Second {
		t.Fatalf("Throttle Config = %+v", got)
	}
}

func TestThrottleFleet(t *testing.T) {
	th, _ := NewThrottle(ThrottleConfig{K: 2, Window: time.Minute})
	for range 10 {
		th.Record(true)
	}
	if p := th.Probability(); p != 0 {
		t.Fatalf("local probability %v, want 0", p)
	}
	// The fleet sent 990 more requests, 10 accepted: 1000 − 2×20 over 1001.
	th.SetFleet(990, 10)
	want := (1000.0 - 2*20) / 1001
	if p := th.Probability(); math.Abs(p-want) > 1e-12 {
		t.Fatalf("fleet probability %v, want %v", p, want)
	}
	rejected := 0
	for range 1000 {
		if !th.Allow() {
			rejected++
		} else {
			th.Record(false)
		}
	}
	if rejected < 800 {
		t.Fatalf("rejected %d of 1000 with fleet p ≈ %.2f", rejected, want)
	}
	if r, a := th.LocalCounts(); r != 1010 || a != 10 {
		t.Fatalf("LocalCounts = %d, %d; want 1010, 10", r, a)
	}
	th.ClearFleet()
	th2, _ := NewThrottle(ThrottleConfig{K: 2, Window: time.Minute})
	th2.SetFleet(-1, -1)
	if p := th2.Probability(); p != 0 {
		t.Fatalf("negative fleet counts gave p = %v", p)
	}
}

// TestDoSharedBudget: Do refuses a retry when the fleet has spent the
// reserve, and grants it after ClearFleet.
func TestDoSharedBudget(t *testing.T) {
	b, _ := NewBudget(BudgetConfig{Ratio: -1, MinPerSecond: 1, Window: time.Second})
	b.SetFleet(0, 1, 10)
	p := Policy{Initial: Immediate, MaxAttempts: 2, Budget: b}
	fail := errors.New("fail")
	err := Do(context.Background(), p, func(context.Context) error { return fail })
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonBudget {
		t.Fatalf("shared: err = %v, want ReasonBudget", err)
	}
	b.ClearFleet()
	err = Do(context.Background(), p, func(context.Context) error { return fail })
	if !errors.As(err, &e) || e.Reason != ReasonAttempts {
		t.Fatalf("local: err = %v, want ReasonAttempts", err)
	}
}
