package fleet

import (
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/redistest"
)

// The package doc: "When a sync fails or does not answer within Timeout,
// the engine calls ClearFleet at once". The engine relied on the Store
// to honour the context's deadline; a client that does not (go-redis
// without ContextTimeoutEnabled waits its ReadTimeout, 3 s by default;
// srvStore here ignores ctx entirely) kept the Budget deciding with the
// fleet's stale counts for as long as the server took, and Close waited
// for it. The server is real, paused (CLIENT PAUSE): it replies late.
func TestSlowStoreFallsBackWithinTimeout(t *testing.T) {
	srv := redistest.Start(t)
	b, _ := retry.NewBudget(retry.BudgetConfig{})
	e, err := StartBudget(Config{Name: "x", Prefix: "slowstore", Logger: quiet}, srvStore{srv: srv}, b)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			e.Close()
		}
	}()
	if !waitForSyncs(e, 1) || !e.Shared() {
		t.Fatal("did not join")
	}
	const pause = 1200 * time.Millisecond
	if _, err := srv.Do("CLIENT", "PAUSE", "1200", "ALL"); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	for e.Shared() && time.Since(paused) < 700*time.Millisecond {
		time.Sleep(5 * time.Millisecond)
	}
	if d := time.Since(paused); e.Shared() || d > 700*time.Millisecond {
		t.Errorf("store not answering: still shared after %v, want a fallback within interval + timeout (200 ms; 700 ms with slack)", d.Round(time.Millisecond))
	}
	start := time.Now()
	e.Close()
	closed = true
	if d := time.Since(start); d > 300*time.Millisecond {
		t.Errorf("Close took %v with a sync in progress", d.Round(time.Millisecond))
	}
	// Let the call given up on end before goleak looks (srvStore's own
	// deadline is 5 s).
	time.Sleep(time.Until(paused.Add(pause + 50*time.Millisecond)))
}
