package retry

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func grants(b *Budget, n int) int {
	got := 0
	for range n {
		if b.allowRetry() {
			got++
		}
	}
	return got
}

func TestBudgetRatioAndExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := NewBudget(BudgetConfig{Ratio: 0.1, MinPerSecond: -1, Window: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if g := grants(b, 5); g != 0 {
			t.Fatalf("no requests: %d retries granted, want 0", g)
		}
		for range 100 {
			b.record(false)
			b.record(true) // retries earn nothing
		}
		if g := grants(b, 20); g != 10 {
			t.Fatalf("100 requests at 10%%: %d retries granted, want 10", g)
		}
		// Withdrawals and deposits both age out: after a window, 100 new
		// requests give 10 new retries and old ones count for nothing.
		time.Sleep(5 * time.Second)
		for range 50 {
			b.record(false)
		}
		if g := grants(b, 20); g != 5 {
			t.Fatalf("5 s later, 50 more requests: %d retries, want 5 (old withdrawals still live)", g)
		}
		time.Sleep(6 * time.Second) // first batch (t=0) expired, second (t=5s) live
		if g := grants(b, 20); g != 0 {
			t.Fatalf("after the first batch expired: %d retries, want 0 (50 live requests, 5 live retries)", g)
		}
		time.Sleep(10 * time.Second)
		if g := grants(b, 20); g != 0 {
			t.Fatalf("all expired: %d retries, want 0", g)
		}
		for range 30 {
			b.record(false)
		}
		if g := grants(b, 20); g != 3 {
			t.Fatalf("fresh window, 30 requests: %d retries, want 3", g)
		}
	})
}

func TestBudgetFloorRefills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := NewBudget(BudgetConfig{Ratio: -1, MinPerSecond: 2, Window: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if g := grants(b, 50); g != 10 {
			t.Fatalf("floor 2/s over 5 s: %d retries, want 10", g)
		}
		time.Sleep(4 * time.Second) // 0.8 window: grants still live
		if g := grants(b, 50); g != 0 {
			t.Fatalf("before expiry: %d retries, want 0", g)
		}
		time.Sleep(time.Second + time.Millisecond)
		if g := grants(b, 50); g != 10 {
			t.Fatalf("after a window: %d retries, want 10 again", g)
		}
	})
}

func TestBudgetZeroValueDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b Budget
		for range 200 {
			b.record(false)
		}
		// 10% of 200 plus the floor of 1/s over 10 s.
		if g := grants(&b, 100); g != 30 {
			t.Fatalf("zero Budget: %d retries, want 30", g)
		}
	})
}

// TestBudgetStaleClockIsConservative: first attempts recorded without a
// clock reading are dated to the last reading and so expire early, never late.
func TestBudgetStaleClockIsConservative(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := NewBudget(BudgetConfig{Ratio: 1, MinPerSecond: -1, Window: 10 * time.Second})
		time.Sleep(9500 * time.Millisecond)
		for range 10 { // fewer than 64: no clock reading, dated to slot 0
			b.record(false)
		}
		time.Sleep(time.Second)
		if g := grants(b, 20); g != 0 {
			t.Fatalf("got %d retries from requests dated to an expired slot, want 0", g)
		}
	})
}

func TestNewBudgetErrors(t *testing.T) {
	nan := 0.0
	nan = nan / nan
	for _, c := range []BudgetConfig{
		{Ratio: nan}, {MinPerSecond: nan}, {Window: -1}, {Window: time.Microsecond},
	} {
		if _, err := NewBudget(c); err == nil {
			t.Errorf("NewBudget(%+v): no error", c)
		}
	}
	for name, b := range map[string]*Budget{"grpc": GRPCBudget(), "finagle": FinagleBudget(), "aws": AWSBudget()} {
		if !b.set || b.w.slot <= 0 {
			t.Errorf("%s preset not configured", name)
		}
	}
	if r := FinagleBudget().reserve; r != 100 {
		t.Errorf("Finagle reserve = %v, want 10/s × 10 s = 100", r)
	}
	if r := GRPCBudget().reserve; r != 5 {
		t.Errorf("gRPC reserve = %v, want maxTokens/2 = 5", r)
	}
}

// TestBudgetSoak: 200 goroutines share one Budget through Do. Within one
// window (nothing expires before 0.9 × 10 s) the retries sent can never
// exceed Ratio × first attempts + the floor's reserve, exactly: every grant
// is checked under the lock against counts that include it.
func TestBudgetSoak(t *testing.T) {
	b, err := NewBudget(BudgetConfig{Ratio: 0.1, MinPerSecond: 1, Window: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var calls, dos, budgetStops atomic.Int64
	p := Policy{Initial: Immediate, MaxAttempts: 4, Budget: b}
	fail := errors.New("soak: transient")
	var wg sync.WaitGroup
	start := time.Now()
	for g := range 200 {
		wg.Go(func() {
			for i := range 100 {
				dos.Add(1)
				n := 0
				err := Do(context.Background(), p, func(context.Context) error {
					calls.Add(1)
					n++
					if (g+i)%3 == 0 && n < 3 { // a third of requests fail twice
						return fail
					}
					return nil
				})
				if errors.Is(err, ErrBudgetRefused) {
					budgetStops.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if el := time.Since(start); el > 8*time.Second {
		t.Skipf("soak took %v, longer than the window's certain memory", el)
	}
	first := dos.Load()
	retries := calls.Load() - first
	limit := 0.1*float64(first) + 10
	t.Logf("first attempts %d, retries %d (limit %.0f), stopped by budget %d", first, retries, limit, budgetStops.Load())
	if float64(retries) > limit {
		t.Fatalf("retries %d > 0.1 × %d + 10", retries, first)
	}
	if budgetStops.Load() == 0 || float64(retries) < limit-200 {
		t.Fatalf("budget barely used (%d retries of %.0f): the test does not exercise it", retries, limit)
	}
}

func TestDoStopsOnBudget(t *testing.T) {
	b, _ := NewBudget(BudgetConfig{Ratio: -1, MinPerSecond: -1})
	calls := 0
	fail := errors.New("boom")
	err := Do(context.Background(), Policy{Initial: Immediate, Budget: b}, func(context.Context) error {
		calls++
		return fail
	})
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonBudget || !errors.Is(err, ErrBudgetRefused) || !errors.Is(err, fail) {
		t.Fatalf("err = %v, want ReasonBudget wrapping the last error", err)
	}
	if calls != 1 || e.Attempts != 1 {
		t.Fatalf("calls = %d, attempts = %d, want 1, 1", calls, e.Attempts)
	}
}

func TestDoSuccessAllocsWithBudgetAndThrottle(t *testing.T) {
	p := Policy{Budget: &Budget{}, Throttle: &Throttle{}}
	op := func(context.Context) error { return nil }
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() {
		if err := Do(ctx, p, op); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Do success with Budget and Throttle: %v allocs, want 0", n)
	}
}

func BenchmarkBudgetRecordParallel(b *testing.B) {
	bu := &Budget{}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bu.record(false)
		}
	})
}

func BenchmarkBudgetAllowRetryParallel(b *testing.B) {
	bu := &Budget{}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bu.record(false)
			bu.allowRetry()
		}
	})
}

func BenchmarkDoSuccessBudgetThrottleParallel(b *testing.B) {
	p := Policy{Budget: &Budget{}, Throttle: &Throttle{}}
	op := func(context.Context) error { return nil }
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if err := Do(ctx, p, op); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkDoSuccessBudgetThrottle(b *testing.B) {
	p := Policy{Budget: &Budget{}, Throttle: &Throttle{}}
	op := func(context.Context) error { return nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := Do(ctx, p, op); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBudgetSoakAcrossWindows: 200 goroutines over 3 windows of fake time.
// Over a span T the bound is Ratio × first attempts + MinPerSecond × (T +
// 2 × Window): each block of 10 slots grants at most its own deposits'
// share plus one reserve, and a span touches at most T/Window + 2 blocks.
func TestBudgetSoakAcrossWindows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := NewBudget(BudgetConfig{Ratio: 0.1, MinPerSecond: 5, Window: 10 * time.Second})
		var calls, dos atomic.Int64
		p := Policy{Initial: Immediate, MaxAttempts: 3, Budget: b}
		fail := errors.New("soak: down")
		start := time.Now()
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				for range 150 {
					dos.Add(1)
					Do(context.Background(), p, func(context.Context) error { calls.Add(1); return fail })
					time.Sleep(200 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		T := time.Since(start).Seconds()
		first := dos.Load()
		retries := calls.Load() - first
		limit := 0.1*float64(first) + 5*(T+20)
		t.Logf("T %.0fs, first %d, retries %d, limit %.0f", T, first, retries, limit)
		if float64(retries) > limit {
			t.Fatalf("retries %d > %.0f", retries, limit)
		}
		if float64(retries) < 0.1*float64(first) {
			t.Fatalf("retries %d below the ratio's share: budget too strict", retries)
		}
	})
}

// A floor so large that MinPerSecond × Window is +Inf used to be
// accepted; Config then reported MinPerSecond +Inf, which NewBudget
// refuses, although NewBudget(b.config()) is documented to make an
// equivalent Budget.
func TestBudgetConfigRoundTripsOrIsRefused(t *testing.T) {
	for _, c := range []BudgetConfig{
		{MinPerSecond: math.MaxFloat64, Window: 10 * time.Second},
		{MinPerSecond: math.MaxFloat64 / 2, Window: time.Second},
		{Ratio: math.MaxFloat64, MinPerSecond: 1e300, Window: time.Duration(math.MaxInt64)},
		{MinPerSecond: math.MaxFloat64, Window: time.Millisecond + 9}, // not a multiple of the 10 slots
	} {
		b, err := NewBudget(c)
		if err != nil {
			continue
		}
		if _, err := NewBudget(b.config()); err != nil {
			t.Errorf("NewBudget(%+v).config() = %+v, which NewBudget refuses: %v", c, b.config(), err)
		}
	}
}
