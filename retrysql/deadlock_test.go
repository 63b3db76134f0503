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

// TestDeadlocks runs two workers that lock the same two rows in opposite
// orders, 50 transfers each: PostgreSQL breaks each deadlock (after
// deadlock_timeout, 100 ms) by aborting one transaction with 40P01, which
// retrysql re-runs. Both finish, every transfer once; the Observer counts
// the 40P01 re-runs.
func TestDeadlocks(t *testing.T) {
	s := startPG(t)
	pool := newPool(t, newDB(t, s), 2)
	setupBank(t, pool)
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
	const each = 50
	start := time.Now()
	var wg sync.WaitGroup
	for w, pair := range [2][2]int{{1, 2}, {2, 1}} {
		wg.Go(func() {
			for i := range each {
				id := int64(w*each + i + 1)
				err := r.PgxTx(context.Background(), pool, func(ctx context.Context, tx pgx.Tx) error {
					return lockPair(ctx, tx, id, pair[0], pair[1])
				})
				if err != nil {
					t.Errorf("transfer %d: %v", id, err)
				}
			}
		})
	}
	wg.Wait()
	counts := ledgerCounts(t, pool)
	if len(counts) != 2*each {
		t.Errorf("%d transfers in the ledger; want %d", len(counts), 2*each)
	}
	for id, n := range counts {
		if n != 1 {
			t.Errorf("transfer %d applied %d times", id, n)
		}
	}
	checkBalances(t, pool)
	t.Logf("%d transfers in opposite lock orders: all committed once, %d re-runs after 40P01, %v", 2*each, deadlocks.Load(), time.Since(start).Round(10*time.Millisecond))
	if deadlocks.Load() == 0 {
		t.Error("no deadlock was re-run: the workload did not deadlock")
	}
}
