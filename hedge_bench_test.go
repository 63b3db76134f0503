package retry_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// BenchmarkHedgeFastAnswer is a hedged call whose first copy answers
// before the hedge delay: it should cost about BenchmarkHedgeFloor more
// than BenchmarkDoSuccess. BenchmarkHedgeFloorTimer is the timer's share
// of that floor, and BenchmarkHedgeFloorAttempt adds to it the two things
// any hedged call must also do.
func BenchmarkHedgeFastAnswer(b *testing.B) {
	ctx := context.Background()
	h, err := retry.NewHedger(retry.HedgeConfig{FixedDelay: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := retry.Hedge(ctx, retry.Policy{}, h, func(context.Context) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHedgeFloor is the least a hedged call has to do around a call
// that answers before the delay: make the copy's context (so that a hedge
// can cancel it), arm the hedge timer, and stop both.
func BenchmarkHedgeFloor(b *testing.B) {
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		cctx, cancel := context.WithCancel(ctx)
		t := time.AfterFunc(time.Second, func() {})
		err := op(cctx)
		t.Stop()
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHedgeFloorTimer arms and stops one timer, the part of
// BenchmarkHedgeFloor that a call without hedging has no need of.
func BenchmarkHedgeFloorTimer(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		t := time.AfterFunc(time.Second, func() {})
		t.Stop()
	}
}

type attemptKey struct{}

// BenchmarkHedgeFloorAttempt is BenchmarkHedgeFloor plus what every
// hedged call must also do: give the copy a context carrying its attempt
// number (the server is told which attempt it sees), and settle with the
// timer's callback, which runs on another goroutine, under a lock.
func BenchmarkHedgeFloorAttempt(b *testing.B) {
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	var mu sync.Mutex
	b.ReportAllocs()
	for b.Loop() {
		cctx, cancel := context.WithCancel(context.WithValue(ctx, attemptKey{}, 1))
		t := time.AfterFunc(time.Second, func() { mu.Lock(); mu.Unlock() })
		err := op(cctx)
		mu.Lock()
		t.Stop()
		mu.Unlock()
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
}
