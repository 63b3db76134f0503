package fleet

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/internal/redistest"
)

// lateStore makes one call run late: when late is set, the next call is
// given up on (it waits for its context, unsent) and runs on the server
// just after the call that follows it, as when a server stalled with
// both queued on two connections takes the newer first.
type lateStore struct {
	Store
	mu         sync.Mutex
	late       bool
	keys, args []string // the call given up on, to run late
}

func (s *lateStore) EvalSHA(ctx context.Context, sha string, keys, args []string) ([]int64, error) {
	s.mu.Lock()
	if s.late {
		s.late = false
		s.keys, s.args = slices.Clone(keys), slices.Clone(args)
		s.mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	k, a := s.keys, s.args
	s.keys, s.args = nil, nil
	s.mu.Unlock()
	r, err := s.Store.EvalSHA(ctx, sha, keys, args)
	if k != nil {
		s.Store.EvalSHA(ctx, sha, k, a) // its reply is nobody's
	}
	return r, err
}

// A sync given up on (a timeout) that the server ran after the process's
// next sync wrote its older, smaller hold over the newer one: the process
// granted from the newer lease while the store counted only the older
// hold, and leased the difference to the others. Here the process asked for
// 5 retries while the late sync was on its way: its next sync leased it 4
// and the late one then left a hold of 2. A sync that finds a later one of
// the same process already run never shrinks its hold.
func TestLateSyncKeepsNewerHold(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name string
		s    Store
		hold func(key, tok string) string
	}{
		{"memStore", newMemStore(), nil},
		{"redis", srvStore{srv: srv}, func(key, tok string) string { v, _ := srv.Do("HGET", key, tok); return v }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if m, ok := tc.s.(*memStore); ok {
					tc.hold = func(key, tok string) string {
						m.mu.Lock()
						defer m.mu.Unlock()
						v, _ := m.hget(key, tok)
						return v
					}
				}
				cfg := retry.BudgetConfig{Ratio: 0.1, MinPerSecond: -1, Window: 2 * time.Second} // headroom: 0.1 × first attempts
				ecfg := Config{Name: "x", Prefix: "late-" + tc.name, Logger: quiet, Interval: DefaultInterval, Timeout: DefaultInterval}
				engine := func(s Store) (*retry.Budget, *Engine) {
					b, _ := retry.NewBudget(cfg)
					e, err := newEngine(ecfg, s, budgetCounter{b}, "budget", cfg.Window, b)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { active.Delete(b) })
					return b, e
				}
				ls := &lateStore{Store: tc.s}
				x, ex := engine(ls)
				y1, ey1 := engine(tc.s)
				_, ey2 := engine(tc.s)
				_, ey3 := engine(tc.s)
				for _, e := range []*Engine{ex, ey1, ey2, ey3} { // four live processes, no headroom yet
					e.syncOnce()
				}
				time.Sleep(DefaultInterval)
				ls.mu.Lock()
				ls.late = true
				ls.mu.Unlock()
				done := make(chan struct{})
				go func() { ex.syncOnce(); close(done) }() // given up on at its timeout
				synctest.Wait()                            // its arguments are read: it waits
				for range 5 {
					if account.AllowRetry(x) { // no lease yet: refused, asked
						t.Fatal("a retry granted with no headroom")
					}
				}
				for range 100 {
					account.RecordAttempt(y1)
				}
				// Headroom 10: 2 each, the fair share of 4 (y1 syncs twice:
				// its first push holds 0.1 × its new first attempts until
				// its lease has replaced the previous one).
				for _, e := range []*Engine{ey1, ey1, ey2, ey3} {
					e.syncOnce()
				}
				<-done
				synctest.Wait() // the call given up on has returned
				ex.syncOnce()   // leased what it asked for, 4 of the 4 free; then the late sync runs
				if ex.lease.Retries < 2 {
					t.Fatalf("lease %d: the scene did not set up", ex.lease.Retries)
				}
				hold, _ := strconv.ParseInt(tc.hold(ex.leaseKeys[0], ex.token), 10, 64)
				t.Logf("lease %d, hold %d", ex.lease.Retries, hold)
				if hold < ex.lease.Retries {
					t.Errorf("the store holds %d for the process, whose lease is %d: the late sync shrank the newer hold", hold, ex.lease.Retries)
				}
			})
		})
	}
}
