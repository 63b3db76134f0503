package fleet

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/internal/redistest"
)

// teeStore sends every call to a real redis-server running [Script] and
// to a memStore, and records whether their replies differ.
type teeStore struct {
	real srvStore
	mem  *memStore
	down atomic.Bool // every call fails unsent

	mu         sync.Mutex
	calls      int
	mismatches []string
	leases     map[int64]bool // the lease values answered
	dropOnlyA  int            // syncs that drop first attempts and push retries (a stalled process)
}

func (s *teeStore) Load(ctx context.Context, script string) (string, error) {
	if s.down.Load() {
		return "", errDown
	}
	if _, err := s.mem.Load(ctx, script); err != nil {
		return "", err
	}
	return s.real.Load(ctx, script)
}

func (s *teeStore) EvalSHA(ctx context.Context, sha string, keys, args []string) ([]int64, error) {
	s.mu.Lock() // one call at a time, in the same order on both
	defer s.mu.Unlock()
	if s.down.Load() {
		return nil, errDown
	}
	want, err := s.real.EvalSHA(ctx, sha, keys, args)
	if err != nil {
		return nil, err
	}
	got, err := s.mem.EvalSHA(ctx, "mem", keys, args)
	s.calls++
	if err != nil || !slices.Equal(got, want) {
		s.mismatches = append(s.mismatches, "keys "+keys[0]+"…, args "+joinArgs(args)+": script "+fmtInts(want)+", memStore "+fmtInts(got))
	}
	if len(args) >= 9 {
		s.leases[want[len(want)-1]] = true
	}
	if args[4] == "1" && args[5] == "0" {
		s.dropOnlyA++
	}
	if s.calls%7 == 0 { // a reply lost after both ran the script
		return nil, errors.New("read: connection reset by peer")
	}
	return want, nil
}

func joinArgs(a []string) string {
	out := ""
	for i, s := range a {
		if i > 0 {
			out += " "
		}
		out += s
	}
	return out
}

func fmtInts(v []int64) string {
	out := "["
	for i, n := range v {
		if i > 0 {
			out += " "
		}
		out += strconv.FormatInt(n, 10)
	}
	return out + "]"
}

// The memStore that the long-run tests use answers every sync exactly as
// the real script on a real redis-server does: several Budgets with
// leases of every size, first attempts and retries, one Budget closed
// (its hold expires and is purged), one shared late, the store down long
// enough that counts are dropped, replies lost after the script ran (the
// mark keys), and a Throttle (no lease).
func TestMemStoreMatchesScript(t *testing.T) {
	srv := redistest.Start(t)
	synctest.Test(t, func(t *testing.T) {
		tee := &teeStore{real: srvStore{srv: srv}, mem: newMemStore(), leases: map[int64]bool{}}
		cfg := retry.BudgetConfig{Ratio: 0.2, MinPerSecond: 2, Window: time.Second} // reserve 2: fair shares of 0 too
		ecfg := Config{Name: "x", Prefix: "conform", Logger: quiet}
		var bs []*retry.Budget
		var es []*Engine
		share := func() {
			b, _ := retry.NewBudget(cfg)
			e, err := StartBudget(ecfg, tee, b)
			if err != nil {
				t.Fatal(err)
			}
			bs, es = append(bs, b), append(es, e)
		}
		for range 6 { // 3 busy, 3 idle (their fair share is 0: the single retry that goes round)
			share()
		}
		th, _ := retry.NewThrottle(retry.ThrottleConfig{Window: time.Second})
		et, err := StartThrottle(ecfg, tee, th)
		if err != nil {
			t.Fatal(err)
		}
		defer et.Close()
		// A process whose syncs are run by hand, 400 ms apart (stalled
		// between them: its first attempts are dropped, its retries pushed).
		sb, _ := retry.NewBudget(cfg)
		se, err := newEngine(ecfg, tee, budgetCounter{sb}, "budget", cfg.Window, sb)
		if err != nil {
			t.Fatal(err)
		}
		defer active.Delete(sb)
		for step := range 300 { // 3 s in steps of 10 ms
			if step%40 == 0 {
				se.syncOnce()
			}
			if step%40 < 5 {
				account.RecordAttempt(sb)
				account.AllowRetry(sb)
			}
			for i, b := range bs {
				if i == 1 && step >= 100 {
					continue // closed
				}
				if i >= 3 && i < 6 {
					if step%50 == 0 {
						account.RecordAttempt(b)
					}
					continue
				}
				if step%(i+1) == 0 {
					account.RecordAttempt(b)
					account.Record(th, step%3 == 0)
				}
				if step%(2*i+3) == 0 {
					account.AllowRetry(b)
				}
			}
			switch step {
			case 100:
				es[1].Close()
			case 150:
				share()
			case 200:
				tee.down.Store(true)
			case 250:
				tee.down.Store(false)
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, e := range es {
			e.Close()
		}
		tee.mu.Lock()
		defer tee.mu.Unlock()
		t.Logf("%d syncs compared (%d of a stalled process); lease values seen: %v", tee.calls, tee.dropOnlyA, tee.leases)
		for i, m := range tee.mismatches {
			if i == 5 {
				t.Errorf("… %d mismatches in all", len(tee.mismatches))
				break
			}
			t.Errorf("reply differs: %s", m)
		}
		if tee.calls < 80 || len(tee.leases) < 3 || tee.dropOnlyA == 0 {
			t.Errorf("%d calls, lease values %v, %d syncs of a stalled process: the sequence exercised too little", tee.calls, tee.leases, tee.dropOnlyA)
		}
	})
}
