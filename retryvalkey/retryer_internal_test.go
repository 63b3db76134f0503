package retryvalkey

import (
	"context"
	"testing"

	"github.com/valkey-io/valkey-go"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/redistest"
)

// TestRegisterSharedCommand: a command built once and sent by two calls at
// the same time (a pinned command) is found by neither call's delay, which
// cannot tell them apart, and is forgotten once both have returned.
func TestRegisterSharedCommand(t *testing.T) {
	b := bareClient(t)
	cmd := b.B().Get().Key("k").Build().Pin()
	r := &retryer{p: retry.Policy{}}
	ctx := context.Background()
	k1, k2 := keep(&cmd), keep(&cmd)
	defer k1.release()
	defer k2.release()
	c1 := r.begin(ctx, k1, false)
	r.register(c1, &cmd)
	if got := r.lookup(&cmd); got != c1 {
		t.Fatalf("one call registered: lookup %p, want %p", got, c1)
	}
	c2 := r.begin(ctx, k2, false)
	r.register(c2, &cmd)
	if got := r.lookup(&cmd); got != nil {
		t.Fatalf("two calls registered the same command: lookup %p, want nil", got)
	}
	r.end(c1)
	if got := r.lookup(&cmd); got != nil {
		t.Fatalf("one of two calls ended: lookup %p, want nil (still ambiguous)", got)
	}
	r.end(c2)
	if len(r.calls) != 0 {
		t.Fatalf("both calls ended: %d commands still registered", len(r.calls))
	}
}

// bareClient starts a redis-server and returns a valkey-go client of it,
// without retrykit's layer or a client-side cache, closed (before the
// server stops) when tb ends.
func bareClient(tb testing.TB) valkey.Client {
	tb.Helper()
	srv := redistest.Start(tb)
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}
