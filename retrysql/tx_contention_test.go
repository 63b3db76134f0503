package retrysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrysql"
)

// fullWorkload reports whether RETRYKIT_SQL_FULL=1 asks for the issue's
// whole contention workload (16 workers × 200 transfers, four ways side by
// side, about a minute on 2 cores); by default a twentieth of it runs through
// retrysql alone.
func fullWorkload() bool { return os.Getenv("RETRYKIT_SQL_FULL") == "1" }

// workloadPolicy is the policy the contention figures in docs/sql.md use.
func workloadPolicy() retry.Policy {
	return retry.Policy{Initial: 10 * time.Millisecond, MaxDelay: time.Second, MaxAttempts: retry.Unlimited,
		MaxElapsed: time.Minute}
}

// way is one way of running a transfer: it returns how many times the
// transaction ran and the error it ended with.
type way struct {
	name string
	run  func(ctx context.Context, pool *pgxpool.Pool, m move) (runs int, err error)
}

func serializable() pgx.TxOptions { return pgx.TxOptions{IsoLevel: pgx.Serializable} }

// once runs the transfer in one transaction.
func once(ctx context.Context, pool *pgxpool.Pool, m move) error {
	return pgx.BeginTxFunc(ctx, pool, serializable(), func(tx pgx.Tx) error { return transfer(ctx, tx, m) })
}

func conflict(err error) bool { s := sqlstate(err); return s == "40001" || s == "40P01" }

var (
	noRetry = way{"no retry (pgx)", func(ctx context.Context, pool *pgxpool.Pool, m move) (int, error) {
		return 1, once(ctx, pool, m)
	}}
	immediate = way{"immediate re-run loop, ≤ 50 runs", func(ctx context.Context, pool *pgxpool.Pool, m move) (int, error) {
		for n := 1; ; n++ {
			err := once(ctx, pool, m)
			if err == nil || !conflict(err) || n == 50 {
				return n, err
			}
		}
	}}
	fullJitter = way{"full-jitter loop, 10 ms base, 1 s cap", func(ctx context.Context, pool *pgxpool.Pool, m move) (int, error) {
		for n := 1; ; n++ {
			err := once(ctx, pool, m)
			if err == nil || !conflict(err) || n == 1000 {
				return n, err
			}
			d := min(time.Second, 10*time.Millisecond<<min(n-1, 20))
			time.Sleep(rand.N(d))
		}
	}}
)

// retrysqlWay runs the transfer through a Runner with p.
func retrysqlWay(t *testing.T, p retry.Policy) way {
	r, err := retrysql.New(p, retrysql.WithIsolation(sql.LevelSerializable))
	if err != nil {
		t.Fatal(err)
	}
	return way{"retrysql, " + describe(p), func(ctx context.Context, pool *pgxpool.Pool, m move) (int, error) {
		runs := 0
		err := r.PgxTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error {
			runs++
			return transfer(ctx, tx, m)
		})
		return runs, err
	}}
}

func describe(p retry.Policy) string {
	return fmt.Sprintf("Initial %v, MaxDelay %v, jitter %v", p.Initial, p.MaxDelay, p.Jitter)
}

// result is what one way did with the workload.
type result struct {
	committed, runs, maxRuns int
	failures                 map[string]int // by SQLSTATE ("" for others)
	wall                     time.Duration
}

// runWorkload runs the moves on a fresh bank through w, one goroutine per
// worker, and checks the ledger: no transfer applied twice, every one
// reported committed applied once, balances that add up.
func runWorkload(t *testing.T, url string, w way, work [][]move) result {
	t.Helper()
	pool := newPool(t, url, int32(len(work)))
	setupBank(t, pool)
	ctx := context.Background()
	var (
		mu  sync.Mutex
		res = result{failures: map[string]int{}}
		ok  = make(map[int64]bool)
		wg  sync.WaitGroup
	)
	var committed atomic.Int64
	start := time.Now()
	for _, ms := range work {
		wg.Go(func() {
			for _, m := range ms {
				runs, err := w.run(ctx, pool, m)
				mu.Lock()
				res.runs += runs
				res.maxRuns = max(res.maxRuns, runs)
				if err == nil {
					committed.Add(1)
					ok[m.id] = true
				} else {
					res.failures[sqlstate(err)]++
					if sqlstate(err) == "" {
						t.Errorf("%s: transfer %d: %v", w.name, m.id, err)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.wall = time.Since(start)
	res.committed = int(committed.Load())
	counts := ledgerCounts(t, pool)
	for id, n := range counts {
		if n != 1 {
			t.Errorf("%s: transfer %d applied %d times", w.name, id, n)
		}
		if !ok[id] {
			t.Errorf("%s: transfer %d applied but reported failed", w.name, id)
		}
	}
	if len(counts) != res.committed {
		t.Errorf("%s: %d transfers in the ledger, %d reported committed", w.name, len(counts), res.committed)
	}
	checkBalances(t, pool)
	pool.Close()
	return res
}

func (r result) String() string {
	var fails []string
	for code, n := range r.failures {
		fails = append(fails, fmt.Sprintf("%d with %q", n, code))
	}
	return fmt.Sprintf("committed %d, re-runs %d (most runs of one transfer %d), wall %v, failed: %s",
		r.committed, r.runs-r.committed-sumFailures(r), r.maxRuns, r.wall.Round(10*time.Millisecond), strings.Join(fails, ", "))
}

func sumFailures(r result) int {
	n := 0
	for _, v := range r.failures {
		n += v
	}
	return n
}

// TestContention is the workload: workers move money between 10
// accounts under SERIALIZABLE, with deadlock_timeout 100 ms. Through
// retrysql every transfer commits exactly once and the books balance.
// With RETRYKIT_SQL_FULL=1 it runs the whole workload (16 × 200) four
// ways side by side, and logs committed transfers, re-runs and wall time
// for each (the figures of docs/sql.md).
func TestContention(t *testing.T) {
	s := startPG(t)
	workers, each := 16, 10
	ways := []way{retrysqlWay(t, workloadPolicy())}
	if fullWorkload() {
		each = 200
		ways = []way{noRetry, immediate, fullJitter, ways[0]}
	}
	work := moves(workers, each, 38)
	results := make([]result, len(ways))
	for i, w := range ways {
		results[i] = runWorkload(t, newDB(t, s), w, work)
		t.Logf("%-60s %v", w.name+":", results[i])
	}
	// retrysql commits every transfer.
	got := results[len(results)-1]
	if got.committed != workers*each {
		t.Errorf("retrysql committed %d of %d transfers", got.committed, workers*each)
	}
	if got.runs <= got.committed {
		t.Errorf("retrysql ran %d transactions for %d transfers: the workload had no conflicts to retry", got.runs, got.committed)
	}
}

// TestContentionPolicies runs the whole workload, twice over, through the
// hand-written full-jitter loop and through retrysql with a few policies
// (RETRYKIT_SQL_POLICIES=1; about 3 minutes on 2 cores), for the policy
// comparison in docs/sql.md.
func TestContentionPolicies(t *testing.T) {
	if os.Getenv("RETRYKIT_SQL_POLICIES") != "1" {
		t.Skip("set RETRYKIT_SQL_POLICIES=1 to compare policies on the whole workload")
	}
	s := startPG(t)
	work := moves(16, 200, 38)
	pol := func(initial time.Duration, j retry.Jitter) retry.Policy {
		p := workloadPolicy()
		p.Initial, p.Jitter = initial, j
		return p
	}
	ways := []way{
		fullJitter,
		retrysqlWay(t, pol(10*time.Millisecond, retry.Jitter{})),
		retrysqlWay(t, pol(20*time.Millisecond, retry.Jitter{})),
		retrysqlWay(t, pol(5*time.Millisecond, retry.Jitter{})),
		retrysqlWay(t, pol(10*time.Millisecond, retry.EqualJitter())),
		retrysqlWay(t, pol(20*time.Millisecond, retry.FullJitter())),
	}
	for round := range 2 {
		for _, w := range ways {
			t.Logf("round %d: %-60s %v", round+1, w.name+":", runWorkload(t, newDB(t, s), w, work))
		}
	}
}
