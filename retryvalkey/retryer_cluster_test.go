package retryvalkey_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
	"github.com/retrykit/retry/retryvalkey"
)

// TestClusterPipelineRepeats: on a real Redis Cluster of three nodes that
// answers CLUSTERDOWN (slot 0 is served by none) until the Observer has the
// slot added at the first retry, a DoMulti of reads spread over the three
// nodes is repeated by valkey-go's cluster loop, whose node goroutines ask
// RetryDelay at once; each round is one attempt of the call's one Loop,
// and the call succeeds. Run with -race, it checks the registry and delay
// with concurrent askers.
func TestClusterPipelineRepeats(t *testing.T) {
	ports := []int{startClusterNode(t), startClusterNode(t), startClusterNode(t)}
	for i, p := range ports {
		lo, hi := max(i*16384/3, 1), (i+1)*16384/3-1
		nodeDo(t, p, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi))
	}
	for _, p := range ports[1:] {
		nodeDo(t, ports[0], "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(p))
	}
	formed := func() bool {
		for _, p := range ports {
			info := nodeDo(t, p, "CLUSTER", "INFO")
			if !strings.Contains(info, "cluster_known_nodes:3") || !strings.Contains(info, "cluster_slots_assigned:16383") {
				return false
			}
		}
		return true
	}
	for end := time.Now().Add(10 * time.Second); !formed(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("cluster did not form")
		}
	}
	var addrs []string
	for _, p := range ports {
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(p))
	}
	var (
		rec   retrytest.Recorder
		once  sync.Once
		added sync.WaitGroup
	)
	p := retry.Policy{Initial: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond, MaxAttempts: 200,
		Observer: retry.Observers(retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			if e.Kind == retry.EventRetry {
				once.Do(func() { added.Go(func() { addSlotZero(t, addrs[0]) }) })
			}
		}), &rec)}
	c, err := retryvalkey.NewClient(context.Background(), valkey.ClientOption{InitAddress: addrs, DisableCache: true}, p)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.Close()
		// A CLUSTERDOWN starts valkey-go's lazy topology refresh, which
		// sleeps up to a second first and which Close does not stop:
		// wait for it here rather than have TestMain's leak check see it.
		waitGone(t, "valkey-go.(*call).DelayDo")
	}()
	// "b", "c" and "a" hash to slots 3300, 7365 and 15495: one per node.
	ctx := retrytest.WithCall(context.Background(), "pipeline")
	for i, r := range c.DoMulti(ctx, c.B().Get().Key("b").Build(), c.B().Get().Key("c").Build(), c.B().Get().Key("a").Build()) {
		if err := r.Error(); err != nil && !valkey.IsValkeyNil(err) {
			t.Errorf("GET %d: %v; want the cluster up again", i, err)
		}
	}
	added.Wait()
	call := rec.Call("pipeline")
	n := 0
	for _, e := range call.Events {
		if e.Kind == retry.EventAttempt {
			if n++; e.Attempt != n {
				t.Fatalf("events %v; want attempts numbered 1, 2, ...", call.Kinds())
			}
		}
	}
	if done, ok := call.Done(); !ok || n < 2 || done.Reason != 0 || call.Count(retry.EventRetry) != n-1 || len(rec.Calls()) != 1 {
		t.Fatalf("events %v; want one call that succeeds after a retry, each round one attempt", call.Kinds())
	}
	// Each round sends the GETs that failed in the last (rejected with
	// CLUSTERDOWN, or run), one to three as the nodes hear of slot 0: no
	// attempt counted that was not sent.
	seen := 0
	for _, p := range ports {
		seen += getsSeen(t, p)
	}
	if seen < n || seen > 3*n {
		t.Errorf("the nodes saw %d GETs in %d rounds; want 1 to 3 a round", seen, n)
	}
}

// getsSeen returns the GETs the node on port ran or rejected.
func getsSeen(t *testing.T, port int) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(nodeDo(t, port, "INFO", "commandstats"), "\n") {
		stat, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_get:")
		if !ok {
			continue
		}
		for _, f := range strings.Split(stat, ",") {
			if k, v, _ := strings.Cut(f, "="); k == "calls" || k == "rejected_calls" {
				n += atoi(t, v)
			}
		}
	}
	return n
}

// addSlotZero has the node at addr serve slot 0, which brings the cluster
// up once the others hear of it.
func addSlotZero(t *testing.T, addr string) {
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	if err := c.Do(context.Background(), c.B().Arbitrary("CLUSTER", "ADDSLOTS", "0").Build()).Error(); err != nil {
		t.Error(err)
	}
}

// waitGone waits, up to 3 s, until no goroutine runs fn.
func waitGone(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for end := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if !strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn) {
			return
		}
		if time.Now().After(end) {
			t.Errorf("a goroutine still runs %s after 3 s", fn)
			return
		}
	}
}
