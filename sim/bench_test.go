package sim_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/retrykit/retry/sim"
)

// BenchmarkHerd runs the capacity model with the default policy and a herd
// of N clients starting together.
func BenchmarkHerd(b *testing.B) {
	for _, n := range []int{1e4, 1e5, 1e6} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sim.Run(context.Background(), sim.Scenario{Clients: n}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpenHuang runs the Huang scenario as published: 300 s at
// 13,333 calls/s, stuck after its trigger with up to 5 attempts per call.
func BenchmarkOpenHuang(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sim.RunOpen(context.Background(), sim.Huang()); err != nil {
			b.Fatal(err)
		}
	}
}
