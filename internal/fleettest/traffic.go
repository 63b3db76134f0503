package fleettest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/internal/redistest"
)

// infoStats reads the counters of INFO stats that the traffic test needs.
func infoStats(t *testing.T, srv *redistest.Server) (cmds, in, out int64) {
	info, err := srv.Do("INFO", "stats")
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) int64 {
		for _, l := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+":"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		t.Fatalf("INFO stats has no %s", name)
		return 0
	}
	return get("total_commands_processed"), get("total_net_input_bytes"), get("total_net_output_bytes")
}

// ShareSyncTraffic measures what one shared Budget costs the server at
// the default interval, as the server counts it: EVALSHA calls per second
// (at most 10) and bytes per second each way. Figures for docs/storms.md:
// go test -run TestShareSyncTraffic -v in either module.
func ShareSyncTraffic(t *testing.T, dial Dialer) {
	srv := redistest.Start(t)
	b, _ := retry.NewBudget(retry.BudgetConfig{})
	// Connect and load the script first, then measure a steady state.
	s, err := dial(t, srv.Addr()).ShareBudget("traffic", b, ShareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !WaitFor(time.Second, s.Shared) {
		t.Fatal("did not join")
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() { // some traffic, so that every sync pushes counts
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				account.RecordAttempt(b)
				account.AllowRetry(b)
			}
		}
	}()
	defer func() { close(stop); <-stopped }()
	c0, i0, o0 := infoStats(t, srv)
	c1, i1, o1 := infoStats(t, srv) // the cost of INFO itself
	e0, _ := srv.CommandCalls("evalsha")
	const d = 3 * time.Second
	start := time.Now()
	time.Sleep(d)
	e1, _ := srv.CommandCalls("evalsha")
	c2, i2, o2 := infoStats(t, srv)
	el := time.Since(start).Seconds()
	evals := float64(e1-e0-0) / el
	cmds := float64((c2-c1)-(c1-c0)-1) / el // -1: the COMMANDSTATS call
	in := float64((i2-i1)-(i1-i0)) / el
	out := float64((o2-o1)-(o1-o0)) / el
	t.Logf("one shared Budget, default interval: %.1f EVALSHA/s (%.1f commands/s counted by the server, script calls included), %.0f B/s in, %.0f B/s out, %.0f B per sync",
		evals, cmds, in, out, (in+out)/evals)
	if evals > 10.5 || evals < 1 {
		t.Errorf("%.1f syncs per second, want 10 at most (fewer only when a sync timed out)", evals)
	}
}
