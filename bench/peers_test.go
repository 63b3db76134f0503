// Package bench compares retrykit with its peers on identical workloads.
//
// Every benchmark has one sub-benchmark per library, named lib=<name>, so
// that `benchstat -col /lib` puts the libraries side by side. Each peer is
// configured as fairly as its API allows: the same number of attempts, the
// smallest waits it accepts, no logging, and state built once when the
// library allows reuse (per call when its API forces that). The comment on
// each constructor below says exactly how.
package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	avast "github.com/avast/retry-go/v4"
	cenkalti "github.com/cenkalti/backoff/v5"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	sethvargo "github.com/sethvargo/go-retry"

	retry "github.com/retrykit/retry"
)

// attempts is the attempt limit every library gets: 4 attempts = 3 retries.
const attempts = 4

var errTransient = errors.New("bench: transient failure")

// sethvargoErr is wrapped once, so sethvargo pays no allocation per failure
// for its RetryableError marker (a caller could do the same with a fixed error).
var sethvargoErr = sethvargo.RetryableError(errTransient)

// retrykitPolicy: Immediate waits (zero), 4 attempts, no hooks, no logger.
var retrykitPolicy = retry.Policy{Initial: retry.Immediate, MaxAttempts: attempts}

// failsafeExec: a RetryPolicy with 4 attempts and failsafe's default delay,
// which is zero; built once and reused (its executors are immutable).
var failsafeExec = failsafe.With[any](retrypolicy.NewBuilder[any]().WithMaxAttempts(attempts).Build())

// cenkaltiRetry: ZeroBackOff (stateless, zero waits), WithMaxTries(4); the
// options slice is built per call as its API takes variadic options.
func cenkaltiRetry(ctx context.Context, op cenkalti.Operation[struct{}]) error {
	_, err := cenkalti.Retry(ctx, op, cenkalti.WithBackOff(&cenkalti.ZeroBackOff{}), cenkalti.WithMaxTries(attempts))
	return err
}

// avastDo: Attempts(4), Delay(0) with FixedDelay (zero waits, no jitter),
// LastErrorOnly(true) (the cheaper error mode), Context(ctx).
func avastDo(ctx context.Context, op func() error) error {
	return avast.Do(op, avast.Attempts(attempts), avast.Delay(0), avast.DelayType(avast.FixedDelay),
		avast.LastErrorOnly(true), avast.Context(ctx))
}

// sethvargoDo: NewConstant(1ns) (it panics on a zero duration, so 1 ns is
// its minimum wait) with WithMaxRetries(3). The decorator chain holds a
// counter, so it must be built per call.
func sethvargoDo(ctx context.Context, op sethvargo.RetryFunc) error {
	return sethvargo.Do(ctx, sethvargo.WithMaxRetries(attempts-1, sethvargo.NewConstant(time.Nanosecond)), op)
}

func okCtx(context.Context) error { return nil }
func okPlain() error              { return nil }
func okCenkalti() (struct{}, error) {
	return struct{}{}, nil
}

func BenchmarkSuccess(b *testing.B) {
	ctx := context.Background()
	b.Run("lib=retrykit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := retry.Do(ctx, retrykitPolicy, okCtx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lib=cenkalti", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := cenkaltiRetry(ctx, okCenkalti); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lib=avast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := avastDo(ctx, okPlain); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lib=sethvargo", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := sethvargoDo(ctx, okCtx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lib=failsafe", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := failsafeExec.Run(okPlain); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRetry3: the operation fails 3 times with a fixed error, then
// succeeds; zero waits (1 ns for sethvargo). The counter lives in a closure
// for every library alike.
func BenchmarkRetry3(b *testing.B) {
	ctx := context.Background()
	check := func(b *testing.B, err error, n int) {
		if err != nil || n != attempts {
			b.Fatalf("err %v after %d calls, want nil after %d", err, n, attempts)
		}
	}
	b.Run("lib=retrykit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			err := retry.Do(ctx, retrykitPolicy, func(context.Context) error {
				if n++; n < attempts {
					return errTransient
				}
				return nil
			})
			check(b, err, n)
		}
	})
	b.Run("lib=cenkalti", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			err := cenkaltiRetry(ctx, func() (struct{}, error) {
				if n++; n < attempts {
					return struct{}{}, errTransient
				}
				return struct{}{}, nil
			})
			check(b, err, n)
		}
	})
	b.Run("lib=avast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			err := avastDo(ctx, func() error {
				if n++; n < attempts {
					return errTransient
				}
				return nil
			})
			check(b, err, n)
		}
	})
	b.Run("lib=sethvargo", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			err := sethvargoDo(ctx, func(context.Context) error {
				if n++; n < attempts {
					return sethvargoErr
				}
				return nil
			})
			check(b, err, n)
		}
	})
	b.Run("lib=failsafe", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			err := failsafeExec.Run(func() error {
				if n++; n < attempts {
					return errTransient
				}
				return nil
			})
			check(b, err, n)
		}
	})
}

// BenchmarkParallelSuccess: the success path of BenchmarkSuccess from
// GOMAXPROCS goroutines at once, sharing one configuration where the library
// allows it.
func BenchmarkParallelSuccess(b *testing.B) {
	ctx := context.Background()
	run := func(b *testing.B, call func() error) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := call(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("lib=retrykit", func(b *testing.B) { run(b, func() error { return retry.Do(ctx, retrykitPolicy, okCtx) }) })
	b.Run("lib=cenkalti", func(b *testing.B) { run(b, func() error { return cenkaltiRetry(ctx, okCenkalti) }) })
	b.Run("lib=avast", func(b *testing.B) { run(b, func() error { return avastDo(ctx, okPlain) }) })
	b.Run("lib=sethvargo", func(b *testing.B) { run(b, func() error { return sethvargoDo(ctx, okCtx) }) })
	b.Run("lib=failsafe", func(b *testing.B) { run(b, func() error { return failsafeExec.Run(okPlain) }) })
}
