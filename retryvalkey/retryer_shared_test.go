package retryvalkey_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/faultproxy"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retrytest"
)

// TestSharedPinnedCommand: a command built once (Pin) and sent by several
// calls at once, through a proxy that loses a third of the GETs' replies.
// Whether or not the calls overlap, every send is an attempt of one call's
// Loop: each call's events run from attempt 1 without a gap to one
// EventDone, and none is left to a rule outside a Loop.
func TestSharedPinnedCommand(t *testing.T) {
	srv := redistest.Start(t)
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 0.3, Seed: 7, Match: only("get")})
	var rec retrytest.Recorder
	c := newClient(t, px.Addr(), retry.Policy{Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxAttempts: 50, Observer: &rec})
	get := c.B().Get().Key("k").Build().Pin()
	const goroutines, calls = 8, 10
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				ctx := retrytest.WithCall(context.Background(), fmt.Sprint(g, "/", i))
				if err := c.Do(ctx, get).Error(); err != nil && !valkey.IsValkeyNil(err) {
					t.Errorf("GET %d/%d: %v", g, i, err)
				}
			}
		})
	}
	wg.Wait()
	all := rec.Calls()
	if len(all) != goroutines*calls {
		t.Fatalf("%d calls recorded; want %d", len(all), goroutines*calls)
	}
	for _, call := range all {
		n := 0
		for _, e := range call.Events {
			if e.Kind == retry.EventAttempt {
				n++
				if e.Attempt != n {
					t.Fatalf("call %q: events %v; want attempts numbered 1, 2, ...", call.Name, call.Kinds())
				}
			}
		}
		if done, ok := call.Done(); call.Name == "" || !ok || done.Reason != 0 || done.Attempt != n || call.Count(retry.EventDone) != 1 {
			t.Fatalf("call %q: events %v; want a named call ending in one EventDone without a reason after its %d attempts", call.Name, call.Kinds(), n)
		}
	}
}
