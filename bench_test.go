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
	p := retry.Policy{Initial: time.Nanosecond, MaxDelay: time.Nanosecond, Jitter: retry.NoJitter}
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
