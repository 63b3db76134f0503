package retryvalkey_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/fleettest"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retryshare"
	"github.com/retrykit/retry/retryvalkey"
	"github.com/valkey-io/valkey-go"
	"go.uber.org/goleak"
)

func shareClient(t *testing.T, addr string) valkey.Client {
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true,
		// A refused connection fails at once; the timeout only bounds a
		// dial on a loaded machine (100 ms failed once under -race).
		DisableRetry: true, Dialer: net.Dialer{Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// shareDial adapts shareClient for the shared tests in internal/fleettest.
func shareDial(t *testing.T, addr string) fleettest.Client { return fleetClient(shareClient(t, addr)) }

var (
	waitFor = fleettest.WaitFor
	grant   = fleettest.Grant
)

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
	srv := redistest.Start(t)
	fleettest.ShareErrors(t, "retryshare", shareDial(t, srv.Addr()), func(b *retry.Budget) error {
		_, err := retryshare.Budget(retryvalkey.ShareStore(nil), "p", b)
		return err
	})
}

func TestMain(m *testing.M) {
	if fleettest.WorkerMain(fleetAdapter) {
		return
	}
	// valkey-go closes the connections that a cluster topology refresh
	// dropped 5 s later, from a goroutine of its own (cluster.go,
	// _refresh), which Close does not stop: TestClusterScriptFlushedNoFallback,
	// whose nodes meet while the client starts, left one in 2 of 6 runs.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/valkey-io/valkey-go.(*clusterClient)._refresh.func2"))
}

// TestShareReadsFleetKeys: counts another process wrote under the prefix
// (any client: the keys and script are retryredis's too) spend this
// process's budget.
func TestShareReadsFleetKeys(t *testing.T) {
	srv := redistest.Start(t)
	b, _ := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: 1, Window: 10 * time.Second}) // reserve 10
	k := time.Now().UnixNano() / int64(time.Second)
	for i := int64(-2); i < 10; i++ { // 9 retries now and for the next seconds
		key := "{mixed}:budget:w10000:" + strconv.FormatInt(k+i, 10)
		srv.Do("HSET", key, "a", "0", "b", "9")
		srv.Do("PEXPIRE", key, "20000")
	}
	s, err := retryshare.Budget(retryvalkey.ShareStore(shareClient(t, srv.Addr())), "mixed", b)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !waitFor(time.Second, s.Shared) {
		t.Fatal("did not join")
	}
	time.Sleep(300 * time.Millisecond)
	if n := grant(b, 100); n != 0 {
		t.Fatalf("granted %d with the fleet's 9×12 retries in the window", n)
	}
}

// TestShareThroughRetryClient: a Share over the client of NewClient, with
// the shared Budget and Throttle in its policy: the syncs skip the
// wrapper's loop and count in neither.
func TestShareThroughRetryClient(t *testing.T) {
	fleettest.ShareThroughRetryClient(t, func(t *testing.T, addr string, p retry.Policy) fleettest.Client {
		c, err := retryvalkey.NewClient(context.Background(), valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true,
			Dialer: net.Dialer{Timeout: 100 * time.Millisecond}}, p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return fleetClient(c)
	})
}
