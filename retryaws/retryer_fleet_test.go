package retryaws_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/awsfake"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retryaws"
	"github.com/retrykit/retry/retryredis"
	"github.com/retrykit/retry/retryshare"
)

// The fleet: each worker process has its own Budget, Retryer and DynamoDB
// client; what they share is the redis-server and the fake DynamoDB,
// which runs in the test's own process and counts what the fleet sent.
const (
	fleetProcs    = 4
	fleetRatio    = 0.1
	fleetFloor    = 5.0 // MinPerSecond
	fleetWindow   = time.Second
	fleetRun      = time.Second
	fleetRate     = 20 // first attempts per second per worker
	fleetInterval = 100 * time.Millisecond
	fleetEnv      = "RETRYAWS_FLEET_WORKER" // url|redis addr|prefix|shared|start (Unix ns)
)

// A Budget shared through a real redis-server (retryshare.Budget)
// bounds the retries of several processes' AWS clients as it bounds HTTP
// ones, against a DynamoDB that answers 503 to everything: the fleet's
// retries stay within Ratio × first attempts + MinPerSecond × (T + 2 ×
// Window) + one sync interval's allowance per process (the bound of
// ARCHITECTURE.md), while local Budgets each spend their own floor.
func TestFleetBudgetBoundsAWSRetries(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process fleet test: skipped with -short")
	}
	srv := redistest.Start(t)
	allowance := max(1, fleetFloor*fleetInterval.Seconds())
	retries := map[bool]int{}
	for _, shared := range []bool{true, false} {
		f := awsfake.New()
		f.Script = func(string, int) awsfake.Answer { return awsfake.Answer{Status: 503, Code: "ServiceUnavailable"} }
		url := start(t, f)
		begin := time.Now().Add(2 * time.Second) // the workers join the fleet before it
		prefix := fmt.Sprintf("aws-fleet-%d", time.Now().UnixNano())
		var cmds []*exec.Cmd
		for range fleetProcs {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), fleetEnv+"="+strings.Join([]string{url, srv.Addr(), prefix, strconv.FormatBool(shared), strconv.FormatInt(begin.UnixNano(), 10)}, "|"))
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			redistest.KillWithParent(cmd)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds = append(cmds, cmd)
		}
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Fatalf("worker %d: %v", i, err)
			}
		}
		first, total := f.Firsts(), f.Total()
		retries[shared] = total - first
		span := f.Span()
		bound := fleetRatio*float64(first) + fleetFloor*(span+2*fleetWindow).Seconds() + fleetProcs*allowance
		t.Logf("shared %v: %d processes made %d first attempts and %d retries in %v (bound for one shared Budget: %.1f)", shared, fleetProcs, first, total-first, span.Round(time.Millisecond), bound)
		if shared && float64(total-first) > bound {
			t.Errorf("shared: %d retries, above the bound %.1f", total-first, bound)
		}
	}
	if retries[true] >= retries[false] {
		t.Errorf("shared %d retries, local %d: the local Budgets should each have spent their own floor", retries[true], retries[false])
	}
}

// fleetWorker is the body of a worker process (see TestMain): it returns
// the process's exit status.
func fleetWorker(spec string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "fleet worker:", err); return 1 }
	parts := strings.Split(spec, "|")
	if len(parts) != 5 {
		return fail(fmt.Errorf("bad spec %q", spec))
	}
	url, addr, prefix := parts[0], parts[1], parts[2]
	shared, _ := strconv.ParseBool(parts[3])
	beginNs, _ := strconv.ParseInt(parts[4], 10, 64)
	b, err := retry.NewBudget(retry.BudgetConfig{Ratio: fleetRatio, MinPerSecond: fleetFloor, Window: fleetWindow})
	if err != nil {
		return fail(err)
	}
	if shared {
		rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer rc.Close()
		sh, err := retryshare.Budget(retryredis.ShareStore(rc), prefix, b, retryshare.WithSyncInterval(fleetInterval))
		if err != nil {
			return fail(err)
		}
		defer sh.Close()
		for deadline := time.Now().Add(5 * time.Second); !sh.Shared(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				return fail(fmt.Errorf("did not join the fleet"))
			}
		}
	}
	r, err := retryaws.New(retry.Policy{Initial: retry.Immediate, MaxAttempts: 10, Budget: b})
	if err != nil {
		return fail(err)
	}
	_, d := clients(url, r, nil)
	time.Sleep(time.Until(time.Unix(0, beginNs)))
	tick := time.NewTicker(time.Second / fleetRate)
	defer tick.Stop()
	for start := time.Now(); time.Since(start) < fleetRun; <-tick.C {
		_ = opGetItem.call(context.Background(), nil, d) // fails: the fake answers 503
	}
	return 0
}
