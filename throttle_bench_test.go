package retry_test

import (
	"testing"

	"github.com/retrykit/retry"
)

// BenchmarkThrottleHealthy is the healthy path through the public API: a
// decision and an accepted outcome, on one goroutine (the zero Throttle).
func BenchmarkThrottleHealthy(b *testing.B) {
	var th retry.Throttle
	b.ReportAllocs()
	for b.Loop() {
		if th.Allow() {
			th.Record(true)
		}
	}
}

// BenchmarkThrottleHealthyParallel is the same from every P at once, on
// one shared Throttle.
func BenchmarkThrottleHealthyParallel(b *testing.B) {
	var th retry.Throttle
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if th.Allow() {
				th.Record(true)
			}
		}
	})
}
