package retry

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/retrykit/retry/internal/fleetseam"
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
		b.SetFleet(0, 7, leaseOf(b, 100))
		if got := grants(b, 100); got != 3 {
			t.Fatalf("granted %d with 7 fleet retries, want 3", got)
		}
	})
	t.Run("fleet first attempts earn", func(t *testing.T) {
		b, _ := NewBudget(cfg)
		b.SetFleet(20, 0, leaseOf(b, 100)) // 0.5 × 20 = 10 more
		if got := grants(b, 100); got != 20 {
			t.Fatalf("granted %d, want 20", got)
		}
	})
	t.Run("negative fleet counts are zero", func(t *testing.T) {
		b, _ := NewBudget(cfg)
		b.SetFleet(-5, -5, leaseOf(b, 100))
		if got := grants(b, 100); got != 10 {
			t.Fatalf("granted %d, want 10", got)
		}
	})
	t.Run("the lease bounds what is granted until the next sync", func(t *testing.T) {
		b, _ := NewBudget(cfg)
		b.SetFleet(0, 0, leaseOf(b, 2))
		if got := grants(b, 100); got != 2 {
			t.Fatalf("granted %d before the next sync, want the lease 2", got)
		}
		// Own first attempts earn Ratio each, even between syncs.
		for range 4 {
			b.record(false)
		}
		if got := grants(b, 100); got != 2 {
			t.Fatalf("granted %d after 4 first attempts, want 0.5 × 4 = 2", got)
		}
		// A new lease counts from the counts its sync pushed: what was
		// granted after them counts against it.
		b.record(false)
		b.record(false)
		l := leaseOf(b, 3)
		if got := grants(b, 1); got != 1 { // between the read and SetFleet: the old lease's
			t.Fatalf("granted %d of the old lease's last retry", got)
		}
		b.SetFleet(0, 0, l)
		if got := grants(b, 100); got != 2 {
			t.Fatalf("granted %d on a lease of 3 with 1 granted since its counts, want 2", got)
		}
		b.SetFleet(0, 0, leaseOf(b, 0))
		if got := grants(b, 100); got != 0 {
			t.Fatalf("granted %d on a lease of 0, want 0", got)
		}
	})
	t.Run("a lease ends at Until", func(t *testing.T) {
		b, _ := NewBudget(cfg)
		l := leaseOf(b, 5)
		l.Until = time.Now().Add(-time.Millisecond)
		b.SetFleet(0, 0, l)
		if got := grants(b, 100); got != 0 {
			t.Fatalf("granted %d on an ended lease, want 0", got)
		}
		var zero Budget // the zero Budget starts its clock at SetFleet
		zero.SetFleet(0, 0, leaseOf(&zero, 5))
		if got := grants(&zero, 100); got != 5 {
			t.Fatalf("zero Budget granted %d on a lease of 5", got)
		}
	})
	t.Run("negative lease is zero", func(t *testing.T) {
		b, _ := NewBudget(cfg)
		b.SetFleet(0, 0, leaseOf(b, -3))
		if got := grants(b, 100); got != 0 {
			t.Fatalf("granted %d, want 0", got)
		}
	})
	t.Run("asked counts every decision while shared", func(t *testing.T) {
		b, _ := NewBudget(cfg)
		grants(b, 3) // local: not counted
		b.SetFleet(0, 0, leaseOf(b, 2))
		if got := grants(b, 3); got != 2 { // 2 granted, 1 refused
			t.Fatalf("granted %d on a lease of 2", got)
		}
		if n := b.FleetAsked(); n != 3 {
			t.Fatalf("FleetAsked = %d, want 3", n)
		}
	})
	t.Run("clear restores the local budget", func(t *testing.T) {
		b, _ := NewBudget(cfg)
		b.SetFleet(0, 100, leaseOf(b, 100))
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
		b.SetFleet(0, 8, leaseOf(&b, 100))
		if got := grants(&b, 100); got != 2 {
			t.Fatalf("zero Budget granted %d, want 10-8", got)
		}
	})
	t.Run("local counts", func(t *testing.T) {
		b, _ := NewBudget(cfg)
		for range 3 {
			b.record(false)
		}
		grants(b, 2)
		if a, r := b.LocalCounts(); a != 3 || r != 2 {
			t.Fatalf("LocalCounts = %d, %d; want 3, 2", a, r)
		}
	})
}

// leaseOf returns a lease of n retries from b's current counts, for an
// hour.
func leaseOf(b *Budget, n int64) FleetLease {
	a, r := b.LocalCounts()
	return FleetLease{Retries: n, FirstAttempts: a, Granted: r, Until: time.Now().Add(time.Hour)}
}

func TestBudgetConfigResolved(t *testing.T) {
	var zero Budget
	if got := zero.config(); got != (BudgetConfig{Ratio: 0.1, MinPerSecond: 1, Window: 10 * time.Second}) {
		t.Fatalf("zero Budget Config = %+v", got)
	}
	b, _ := NewBudget(BudgetConfig{Ratio: -1, MinPerSecond: 2.5, Window: 3 * time.Second})
	if got := b.config(); got.Ratio != -1 || math.Abs(got.MinPerSecond-2.5) > 1e-9 || got.Window != 3*time.Second {
		t.Fatalf("Config = %+v", got)
	}
	b, _ = NewBudget(BudgetConfig{Ratio: 0.3, MinPerSecond: -2})
	if got := b.config(); got.Ratio != 0.3 || got.MinPerSecond != -1 || got.Window != 10*time.Second {
		t.Fatalf("Config = %+v", got)
	}
	var zt Throttle
	if got := zt.config(); got.K != 2 || got.Window != 10*time.Second || got.MaxProbability != 0.9 || got.CountRejected || got.Accepted != nil {
		t.Fatalf("zero Throttle Config = %+v", got)
	}
	th, _ := NewThrottle(ThrottleConfig{K: 1.5, Window: time.Second})
	if got := th.config(); got.K != 1.5 || got.Window != time.Second {
		t.Fatalf("Throttle Config = %+v", got)
	}
}

func TestThrottleFleet(t *testing.T) {
	th, _ := NewThrottle(ThrottleConfig{K: 2, Window: time.Minute})
	for range 10 {
		th.count(true)
	}
	if p := th.Probability(); p != 0 {
		t.Fatalf("local probability %v, want 0", p)
	}
	// The fleet sent 990 more requests, 10 accepted: 1000 − 2×20 over 1001,
	// 0.96, capped at 0.9.
	th.SetFleet(990, 10)
	want := 0.9
	if p := th.Probability(); math.Abs(p-want) > 1e-12 {
		t.Fatalf("fleet probability %v, want %v", p, want)
	}
	rejected := 0
	for range 1000 {
		if !th.allow() {
			rejected++
		} else {
			th.count(false)
		}
	}
	if rejected < 800 {
		t.Fatalf("rejected %d of 1000 with fleet p ≈ %.2f", rejected, want)
	}
	// Rejected attempts are not counted; those sent are.
	if r, a := th.LocalCounts(); r != 10+int64(1000-rejected) || a != 10 {
		t.Fatalf("LocalCounts = %d, %d; want %d, 10", r, a, 10+1000-rejected)
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
	b.SetFleet(0, 1, leaseOf(b, 10))
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

// The seam is reached through internal/fleetseam, where init registered
// it (these were the Examples of Budget.SetFleet and Throttle.SetFleet when
// the seam was exported): a sync engine tells a Budget what the other
// processes did and the lease the store gave it, and the Budget keeps
// deciding locally; a Throttle's probability counts the fleet's requests.
func TestFleetSeamRegistered(t *testing.T) {
	bs, ts := fleetseam.BudgetOf[*Budget](), fleetseam.ThrottleOf[*Throttle]()

	b, _ := NewBudget(BudgetConfig{Ratio: 0.1, MinPerSecond: 1, Window: 10 * time.Second})
	// The other processes spent 9 of the fleet's reserve of 10 retries,
	// and the store leased this process 1 of what is left.
	first, retries := bs.LocalCounts(b)
	bs.SetFleet(b, 0, 9, fleetseam.Lease{Retries: 1, FirstAttempts: first, Granted: retries, Until: time.Now().Add(time.Second)})
	if a1, a2 := b.allowRetry(), b.allowRetry(); !a1 || a2 {
		t.Errorf("shared with a lease of 1: AllowRetry %v then %v, want true then false", a1, a2)
	}
	if first, retries = bs.LocalCounts(b); first != 0 || retries != 1 || bs.FleetAsked(b) != 2 {
		t.Errorf("LocalCounts %d, %d, FleetAsked %d; want 0, 1, 2", first, retries, bs.FleetAsked(b))
	}
	bs.ClearFleet(b) // the store is down: back to a local budget with its own reserve
	if !b.allowRetry() {
		t.Error("after ClearFleet the Budget refuses a retry from its own reserve")
	}

	th, _ := NewThrottle(ThrottleConfig{K: 2})
	if p := th.Probability(); p != 0 {
		t.Errorf("a new Throttle's probability is %v, want 0", p)
	}
	ts.SetFleet(th, 1000, 100) // the others: 1000 requests, 100 accepted
	if p := th.Probability(); math.Abs(p-0.8) >= 0.005 {
		t.Errorf("with the fleet's 1000 requests and 100 accepts the probability is %v, want 0.80 to two places", p)
	}
	if requests, accepts := ts.LocalCounts(th); requests != 0 || accepts != 0 {
		t.Errorf("LocalCounts %d, %d; want 0, 0 (the fleet's are not local)", requests, accepts)
	}
	ts.ClearFleet(th)
	if p := th.Probability(); p != 0 {
		t.Errorf("after ClearFleet the probability is %v, want 0", p)
	}
}
