package retry_test

import (
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// BenchmarkDelayNoJitter: one wait without jitter, the seed schedule
// (1 s doubling to 32 s), retries 0..9 in turn.
func BenchmarkDelayNoJitter(b *testing.B) {
	p := retry.Policy{Jitter: retry.NoJitter()}
	b.ReportAllocs()
	var d time.Duration
	n := 0
	for b.Loop() {
		d = p.Delay(n, 0, nil)
		if n++; n == 10 {
			n = 0
		}
	}
	sinkDuration = d
}

// BenchmarkDelays64 ranges over the whole default schedule of retries
// 1..64 (MaxAttempts 65), most of it at the 32 s cap.
func BenchmarkDelays64(b *testing.B) {
	p := retry.Policy{MaxAttempts: 65}
	b.ReportAllocs()
	for b.Loop() {
		var sum time.Duration
		for _, d := range p.Delays() {
			sum += d
		}
		sinkDuration = sum
	}
}

var sinkDuration time.Duration
