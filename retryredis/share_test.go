package retryredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/fleettest"
	"github.com/retrykit/retry/retryredis"
	"github.com/retrykit/retry/retryshare"
	"go.uber.org/goleak"
)

func shareClient(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { c.Close() })
	return c
}

// shareDial adapts shareClient for the shared tests in internal/fleettest.
func shareDial(t *testing.T, addr string) fleettest.Client { return fleetClient(shareClient(t, addr)) }

var waitFor = fleettest.WaitFor

// TestShareBudgetTwoProcesses: two Budgets with their own clients share one
// reserve: what one grants, the other cannot.
func TestShareBudgetTwoProcesses(t *testing.T) { fleettest.ShareBudgetTwoProcesses(t, shareDial) }

// TestShareBudgetBoundsHedges: hedges draw on the shared Budget as retries
// do: what hedged calls through one process spend, the other cannot.
func TestShareBudgetBoundsHedges(t *testing.T) { fleettest.ShareBudgetBoundsHedges(t, shareDial) }

// TestShareScriptFlushed: after SCRIPT FLUSH the engine loads the script
// again (NOSCRIPT) and keeps syncing, without a fallback.
func TestShareScriptFlushed(t *testing.T) { fleettest.ShareScriptFlushed(t, shareDial) }

// TestShareForeignData: keys of another type and fields that are not
// numbers under the prefix are logged once and ignored.
func TestShareForeignData(t *testing.T) { fleettest.ShareForeignData(t, shareDial) }

// TestShareFallbackAndRejoin: with the server killed, the share falls back
// within one sync after it, the Budget decides locally (full local
// reserve) and the switch is logged once; restarted empty, it rejoins
// within two sync intervals.
func TestShareFallbackAndRejoin(t *testing.T) { fleettest.ShareFallbackAndRejoin(t, shareDial) }

// TestShareThrottleRecovers: a shared Throttle recovers from a total
// outage about as fast as an unshared one, and one that joins during the
// outage still probes (no lock-out).
func TestShareThrottleRecovers(t *testing.T) { fleettest.ShareThrottleRecovers(t, shareDial) }

func TestShareErrors(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	fleettest.ShareErrors(t, "retryshare", fleetClient(c), func(b *retry.Budget) error {
		_, err := retryshare.Budget(retryredis.ShareStore(nil), "p", b)
		return err
	})
}

func TestMain(m *testing.M) {
	if fleettest.WorkerMain(fleetAdapter) {
		return
	}
	// After PoolSize dials in a row failed (a server down or restarting, in
	// several tests), go-redis probes with one dial per second from a
	// goroutine of its own, which ends by itself at its next try once the
	// client is closed.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// TestShareThroughHookedClient: a Share over a client that
// AddHook made retrykit's, with the shared Budget and Throttle in its
// policy: the syncs bypass the hook and count in neither.
func TestShareThroughHookedClient(t *testing.T) {
	fleettest.ShareThroughRetryClient(t, func(t *testing.T, addr string, p retry.Policy) fleettest.Client {
		c := shareClient(t, addr)
		if err := retryredis.AddHook(context.Background(), c, p); err != nil {
			t.Fatal(err)
		}
		return fleetClient(c)
	})
}
