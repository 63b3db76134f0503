package retrytest

import (
	"context"
	"fmt"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/jitterseed"
)

// NoWaits returns p with no computed waits (Initial set to
// [retry.Immediate]), for unit tests that check what is retried and when
// a call gives up, not how long it waits. Every other field is kept. A
// server's wait ([retry.ServerWait], a Retry-After) is still honoured: run the
// test in a synctest bubble to make it instant, or check it through a
// [Recorder].
func NoWaits(p retry.Policy) retry.Policy {
	p.Initial = retry.Immediate
	return p
}

// Seed returns a child of ctx under which every retry call draws its
// jitter from its own source seeded with seed, so that its waits are the
// same in every run and in every call: those [Schedule] returns (a
// server's wait, when longer, replaces one). Without it the jitter is
// random, as in production. It is meant for tests only.
func Seed(ctx context.Context, seed uint64) context.Context {
	return jitterseed.With(ctx, seed)
}

// Schedule returns the waits that p draws, retry by retry, in a call made
// under [Seed](ctx, seed): one per retry that MaxAttempts allows (the
// first 100 with [retry.Unlimited]). It leaves out what the loop decides
// at run time: MaxElapsed and the context's deadline, which end the call
// sooner, and a server's wait, which replaces a shorter one (the
// integrations add up to a tenth of it, at most 1 s, unseeded). An invalid
// policy gives its Validate error (and no waits), so that it cannot read as
// a policy that never retries.
func Schedule(p retry.Policy, seed uint64) ([]time.Duration, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("retrytest: Schedule: %w", err)
	}
	n := p.MaxAttempts
	switch n {
	case 0:
		n = retry.DefaultMaxAttempts
	case retry.Unlimited:
		n = 101
	}
	src := jitterseed.New(seed)
	out := make([]time.Duration, 0, n-1)
	var prev time.Duration
	for i := range n - 1 {
		d := p.Delay(i, prev, src)
		prev = d
		out = append(out, d)
	}
	return out, nil
}
