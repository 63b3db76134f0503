// Package jitterseed carries a jitter seed in a context, from the retrytest
// kit to the core's loop, so that a test can make a call's waits exact
// without a public seam in the core. Only packages of this repository can
// import it; users reach it through retrytest.Seed.
package jitterseed

import (
	"context"
	"math/rand/v2"
)

type key struct{}

// With returns a child of ctx whose retry loops draw their jitter from a
// source seeded with seed.
func With(ctx context.Context, seed uint64) context.Context {
	return context.WithValue(ctx, key{}, seed)
}

// Rand returns a fresh source seeded as With put it in ctx, or nil when ctx
// carries no seed. Each call gets its own source, so every call made with
// the same seed draws the same waits, whatever runs beside it.
func Rand(ctx context.Context) *rand.Rand {
	seed, ok := ctx.Value(key{}).(uint64)
	if !ok {
		return nil
	}
	return New(seed)
}

// New returns the source that a seed stands for.
func New(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
