package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

var errBench = errors.New("bench: transient")

func BenchmarkDirectCall(b *testing.B) {
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	for b.Loop() {
		if err := op(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDoSuccess(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := retry.Do(ctx, retry.Policy{}, func(context.Context) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDoValueSuccess(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := retry.DoValue(ctx, retry.Policy{}, func(context.Context) (int, error) { return 1, nil }); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDoRetry3(b *testing.B) {
	ctx := context.Background()
	p := retry.Policy{Initial: retry.Immediate}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		err := retry.Do(ctx, p, func(context.Context) error {
			if n++; n <= 3 {
				return errBench
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDoRetry3Wait(b *testing.B) {
	ctx := context.Background()
	p := retry.Policy{Initial: time.Nanosecond, MaxDelay: time.Nanosecond, Jitter: retry.NoJitter()}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		err := retry.Do(ctx, p, func(context.Context) error {
			if n++; n <= 3 {
				return errBench
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDelay(b *testing.B) {
	p := retry.Policy{}
	b.ReportAllocs()
	var d time.Duration
	n := 0
	for b.Loop() {
		d = p.Delay(n&15, d, nil)
		n++
	}
}

func BenchmarkDoSuccessParallel(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := retry.Do(ctx, retry.Policy{}, func(context.Context) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDelayJitter measures one wait's computation for each jitter,
// over retry numbers 0..15 (below and at the cap).
func BenchmarkDelayJitter(b *testing.B) {
	for _, j := range []retry.Jitter{retry.NoJitter(), {}, retry.FullJitter(), retry.EqualJitter(),
		retry.DecorrelatedJitter(), retry.ProportionalJitter(0.2)} {
		b.Run(j.String(), func(b *testing.B) {
			p := retry.Policy{Jitter: j, Multiplier: 1.5}
			b.ReportAllocs()
			var d time.Duration
			n := 0
			for b.Loop() {
				d = p.Delay(n&15, d, nil)
				n++
			}
		})
	}
}

// BenchmarkDelayParallel shows that the process-wide random source takes no
// global lock: the time per wait should not grow with GOMAXPROCS.
func BenchmarkDelayParallel(b *testing.B) {
	p := retry.Policy{Jitter: retry.FullJitter()}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var d time.Duration
		n := 0
		for pb.Next() {
			d = p.Delay(n&15, d, nil)
			n++
		}
	})
}

// BenchmarkDoGiveUp: 4 failed attempts with zero waits, then the *Error.
func BenchmarkDoGiveUp(b *testing.B) {
	ctx := context.Background()
	p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 4}
	b.ReportAllocs()
	for b.Loop() {
		if err := retry.Do(ctx, p, func(context.Context) error { return errBench }); err == nil {
			b.Fatal("no error")
		}
	}
}

// BenchmarkDoValueRetry3: DoValue succeeding after 3 failures, zero waits.
func BenchmarkDoValueRetry3(b *testing.B) {
	ctx := context.Background()
	p := retry.Policy{Initial: retry.Immediate}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		v, err := retry.DoValue(ctx, p, func(context.Context) (int, error) {
			if n++; n <= 3 {
				return 0, errBench
			}
			return n, nil
		})
		if err != nil || v != 4 {
			b.Fatal(v, err)
		}
	}
}

// BenchmarkDelays iterates a default schedule of 9 waits.
func BenchmarkDelays(b *testing.B) {
	p := retry.Policy{}
	b.ReportAllocs()
	for b.Loop() {
		for range p.Delays() {
		}
	}
}

// BenchmarkDoSuccessObserver is BenchmarkDoSuccess with an Observer that
// does nothing: the cost of the two events of a successful call.
func BenchmarkDoSuccessObserver(b *testing.B) {
	p := retry.Policy{Observer: retry.ObserverFunc(func(context.Context, retry.Event) {})}
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := retry.Do(ctx, p, op); err != nil {
			b.Fatal(err)
		}
	}
}
