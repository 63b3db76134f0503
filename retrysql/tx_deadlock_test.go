package retrysql_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrysql"
)

// lockPair updates account a, waits 1 ms holding its lock, then updates
// b: two of them with a and b swapped deadlock when they overlap.
func lockPair(ctx context.Context, tx pgx.Tx, id int64, a, b int) error {
	if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - 1 WHERE id = $1`, a); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_sleep(0.001)`); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + 1 WHERE id = $1`, b); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO ledger VALUES ($1, $2, $3, 1)`, id, a, b)
	return err
}

// runDeadlocks runs two workers that lock rows 1 and 2 in opposite
// orders, each transfer through run, on a fresh bank, and checks that every
// transfer was applied once.
func runDeadlocks(t *testing.T, name string, run func(ctx context.Context, pool *pgxpool.Pool, fn func(context.Context, pgx.Tx) error) error) time.Duration {
	t.Helper()
	pool := newPool(t, newDB(t, startPG(t)), 2)
	setupBank(t, pool)
	const each = 50
	start := time.Now()
	var wg sync.WaitGroup
	for w, pair := range [2][2]int{{1, 2}, {2, 1}} {
		wg.Go(func() {
			for i := range each {
				id := int64(w*each + i + 1)
				err := run(context.Background(), pool, func(ctx context.Context, tx pgx.Tx) error {
					return lockPair(ctx, tx, id, pair[0], pair[1])
				})
				if err != nil {
					t.Errorf("%s: transfer %d: %v", name, id, err)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	counts := ledgerCounts(t, pool)
	if len(counts) != 2*each {
		t.Errorf("%s: %d transfers in the ledger; want %d", name, len(counts), 2*each)
	}
	for id, n := range counts {
		if n != 1 {
			t.Errorf("%s: transfer %d applied %d times", name, id, n)
		}
	}
	checkBalances(t, pool)
	return elapsed
}

// TestDeadlocks runs two workers that lock the same two rows in opposite
// orders, 50 transfers each: PostgreSQL breaks each deadlock (after
// deadlock_timeout, 100 ms) by aborting one transaction with 40P01, which
// retrysql re-runs. Both finish, every transfer once; the Observer counts
// the 40P01 re-runs. With RETRYKIT_SQL_FULL=1 an immediate re-run loop
// runs the same beside it.
func TestDeadlocks(t *testing.T) {
	var deadlocks atomic.Int64
	p := workloadPolicy()
	p.Observer = retry.ObserverFunc(func(_ context.Context, e retry.Event) {
		var pe *pgconn.PgError
		if e.Kind == retry.EventRetry && errors.As(e.Err, &pe) && pe.Code == "40P01" {
			deadlocks.Add(1)
		}
	})
	r, err := retrysql.New(p)
	if err != nil {
		t.Fatal(err)
	}
	took := runDeadlocks(t, "retrysql", func(ctx context.Context, pool *pgxpool.Pool, fn func(context.Context, pgx.Tx) error) error {
		return r.PgxTx(ctx, pool, fn)
	})
	t.Logf("retrysql: 100 transfers in opposite lock orders, all committed once: %d re-runs after 40P01, %v", deadlocks.Load(), took.Round(10*time.Millisecond))
	if deadlocks.Load() == 0 {
		t.Error("no deadlock was re-run: the workload did not deadlock")
	}
	if !fullWorkload() {
		return
	}
	var immediate atomic.Int64
	took = runDeadlocks(t, "immediate", func(ctx context.Context, pool *pgxpool.Pool, fn func(context.Context, pgx.Tx) error) error {
		for n := 1; ; n++ {
			err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error { return fn(ctx, tx) })
			if sqlstate(err) != "40P01" || n == 50 {
				return err
			}
			immediate.Add(1)
		}
	})
	t.Logf("immediate re-run loop: the same, %d re-runs after 40P01, %v", immediate.Load(), took.Round(10*time.Millisecond))
}
