package retry

import "testing"

// BenchmarkThrottleHealthy is a Throttle's healthy path, as a Loop takes
// it: a decision and an accepted outcome, on one goroutine (the zero
// Throttle).
func BenchmarkThrottleHealthy(b *testing.B) {
	var th Throttle
	b.ReportAllocs()
	for b.Loop() {
		if th.allow() {
			th.count(true)
		}
	}
}

// BenchmarkThrottleHealthyParallel is the same from every P at once, on
// one shared Throttle.
func BenchmarkThrottleHealthyParallel(b *testing.B) {
	var th Throttle
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if th.allow() {
				th.count(true)
			}
		}
	})
}
