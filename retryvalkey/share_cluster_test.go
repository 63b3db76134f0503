package retryvalkey_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/fleettest"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retryshare"
	"github.com/retrykit/retry/retryvalkey"
	"github.com/valkey-io/valkey-go"
)

// TestShareSlowServer: a paused server makes the share decide locally
// within its timeout, through a default valkey-go client, and Close does
// not wait for the server.
func TestShareSlowServer(t *testing.T) {
	fleettest.ShareSlowServer(t, func(t *testing.T, addr string) fleettest.Client {
		c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return fleetClient(c)
	})
}

// startClusterNode starts a real redis-server in cluster mode on a free
// loopback port whose cluster bus port (+10000) is free too.
func startClusterNode(t *testing.T) int {
	t.Helper()
	bin := redistest.Binary(t)
	for try := 0; try < 50; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port+10000 > 65535 {
			continue
		}
		if lb, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000)); err != nil {
			continue
		} else {
			lb.Close()
		}
		dir := t.TempDir()
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--logfile", filepath.Join(dir, "redis.log"))
		redistest.KillWithParent(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
				c.Close()
				return port
			}
			select {
			case <-done:
				t.Fatalf("redis-server exited")
			default:
			}
		}
		t.Fatal("cluster node did not start")
	}
	t.Fatal("no free port pair")
	return 0
}

// nodeDo sends one command to one node.
func nodeDo(t *testing.T, port int, args ...string) string {
	t.Helper()
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{"127.0.0.1:" + strconv.Itoa(port)}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v, err := c.Do(context.Background(), c.B().Arbitrary(args...).Build()).ToAny()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return fmt.Sprint(v)
}

// On a Redis Cluster (the docs: "client is a valkey.Client (standalone,
// cluster or Sentinel)"; README: "On Redis Cluster all keys of a prefix
// share one hash slot") the script was loaded with a keyless SCRIPT LOAD,
// which valkey-go sends to an arbitrary node: the EVALSHA, routed to the
// prefix's node, answered NOSCRIPT again and the sync failed, so after
// each SCRIPT FLUSH (or a failover to a node that never loaded it) the
// share fell back to local decisions (its own full reserve) until a load
// happened to reach the right node. The standalone test
// (TestShareScriptFlushed) requires no failure and no fallback.
func TestClusterScriptFlushedNoFallback(t *testing.T) {
	ports := []int{startClusterNode(t), startClusterNode(t), startClusterNode(t)}
	for i, p := range ports {
		lo, hi := i*16384/3, (i+1)*16384/3-1
		nodeDo(t, p, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi))
	}
	for _, p := range ports[1:] {
		nodeDo(t, ports[0], "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(p))
	}
	ok := func() bool {
		for _, p := range ports {
			if !strings.Contains(nodeDo(t, p, "CLUSTER", "INFO"), "cluster_state:ok") {
				return false
			}
		}
		return true
	}
	for end := time.Now().Add(10 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("cluster did not form")
		}
	}
	var addrs []string
	for _, p := range ports {
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(p))
	}
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.Nodes()) != 3 {
		t.Fatalf("%d nodes", len(c.Nodes()))
	}
	b, _ := retry.NewBudget(retry.BudgetConfig{})
	s, err := retryshare.Budget(retryvalkey.ShareStore(c), "cl", b, retryshare.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !waitFor(3*time.Second, s.Shared) {
		t.Fatalf("did not join: %+v", s.Stats())
	}
	base := s.Stats()
	for range 5 {
		for _, p := range ports {
			nodeDo(t, p, "SCRIPT", "FLUSH")
		}
		n := s.Stats().Syncs
		if !waitFor(time.Second, func() bool { return s.Stats().Syncs >= n+2 }) {
			t.Fatalf("no syncs after SCRIPT FLUSH: %+v", s.Stats())
		}
	}
	if st := s.Stats(); st.Failures != base.Failures || st.Fallbacks != base.Fallbacks {
		t.Fatalf("after SCRIPT FLUSH on a cluster: %d failed syncs, %d fallbacks to local decisions, want none",
			st.Failures-base.Failures, st.Fallbacks-base.Fallbacks)
	}
}
