package retrysql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/pgfault"
	"github.com/retrykit/retry/retrysql"
)

// TestNotSent points a runner at a port where nothing listens: every
// attempt fails before sending, the Policy's attempts are all made, and
// the error matches retry.ErrNotSent.
func TestNotSent(t *testing.T) {
	s := startPG(t)
	url := newDB(t, s)
	p := pgfault.Start(t, s.Addr(), pgfault.Config{})
	dead := proxied(url, s.Addr(), p)
	p.Close() // nothing listens on the proxy's port any more
	pool := newPool(t, dead, 1)
	r := quick(t)
	ctx := context.Background()
	runs := 0
	err := r.PgxTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error { runs++; return nil })
	var re *retry.Error
	if !errors.Is(err, retry.ErrNotSent) || !errors.As(err, &re) || re.Attempts != 3 || runs != 0 {
		t.Fatalf("PgxTx: err = %v (runs of fn %d); want not sent after 3 attempts", err, runs)
	}
	_, err = r.PgxExec(ctx, pool, `SELECT 1`)
	if !errors.Is(err, retry.ErrNotSent) || !errors.As(err, &re) || re.Attempts != 3 {
		t.Fatalf("PgxExec: err = %v; want not sent after 3 attempts", err)
	}
	db, err := sql.Open("pgx", dead)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := r.Tx(ctx, db, func(ctx context.Context, tx *sql.Tx) error { return nil }); !errors.As(err, &re) || re.Attempts != 3 {
		t.Fatalf("Tx: err = %v; want 3 attempts", err)
	}
}

// TestTxErrors: an error reply other than 40001 and 40P01, and an error of
// the function's own, end the call at once, rolled back.
func TestTxErrors(t *testing.T) {
	s := startPG(t)
	pool := newPool(t, newDB(t, s), 2)
	mustExec(t, pool, `CREATE TABLE k (id int PRIMARY KEY)`, `INSERT INTO k VALUES (1)`)
	r := quick(t)
	ctx := context.Background()
	runs := 0
	err := r.PgxTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error {
		runs++
		if _, err := tx.Exec(ctx, `INSERT INTO k VALUES (2)`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO k VALUES (1)`)
		return err
	})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23505" || runs != 1 {
		t.Fatalf("unique violation: err = %v after %d runs; want 23505 after 1", err, runs)
	}
	mine := errors.New("insufficient funds")
	runs = 0
	err = r.PgxTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error {
		runs++
		tx.Exec(ctx, `INSERT INTO k VALUES (3)`)
		return mine
	})
	if !errors.Is(err, mine) || runs != 1 {
		t.Fatalf("own error: err = %v after %d runs; want it after 1", err, runs)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM k`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows = %d, %v; want 1 (both transactions rolled back)", n, err)
	}
}

// TestSerializationFailure makes a transaction fail with 40001 at its
// first run (another one commits a write to a row it read, having read the
// row it writes) and checks that the whole function ran again and
// committed.
func TestSerializationFailure(t *testing.T) {
	s := startPG(t)
	pool := newPool(t, newDB(t, s), 3)
	mustExec(t, pool, `CREATE TABLE kv (k int PRIMARY KEY, v int NOT NULL)`, `INSERT INTO kv VALUES (1, 0), (2, 0)`)
	r, err := retrysql.New(retry.Policy{Initial: time.Millisecond, MaxDelay: 10 * time.Millisecond, MaxAttempts: 3},
		retrysql.WithIsolation(sql.LevelSerializable))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	runs := 0
	err = r.PgxTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error {
		runs++
		var sum int
		if err := tx.QueryRow(ctx, `SELECT sum(v) FROM kv`).Scan(&sum); err != nil {
			return err
		}
		if runs == 1 {
			// Another serializable transaction reads both rows and writes
			// row 1, and commits first.
			err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SELECT sum(v) FROM kv`); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `UPDATE kv SET v = v + 1 WHERE k = 1`)
				return err
			})
			if err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `UPDATE kv SET v = $1 + 10 WHERE k = 2`, sum)
		return err
	})
	if err != nil || runs != 2 {
		t.Fatalf("err = %v after %d runs; want success after 2", err, runs)
	}
	var v int
	if err := pool.QueryRow(ctx, `SELECT v FROM kv WHERE k = 2`).Scan(&v); err != nil || v != 11 {
		t.Fatalf("v = %d, %v; want 11 (the re-run read the other's write)", v, err)
	}
}

// TestReadOnlyLostCommit: a read-only transaction whose COMMIT reply was
// lost applied nothing, so it is run again.
func TestReadOnlyLostCommit(t *testing.T) {
	s := startPG(t)
	url := newDB(t, s)
	p := pgfault.Start(t, s.Addr(), pgfault.Config{Lose: 1})
	pool := newPool(t, proxied(url, s.Addr(), p), 1)
	ctx := context.Background()
	for _, ro := range []bool{false, true} {
		var opts []retrysql.Option
		if ro {
			opts = append(opts, retrysql.WithReadOnly())
		}
		r := quick(t, opts...)
		runs := 0
		err := r.PgxTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error {
			runs++
			_, err := tx.Exec(ctx, `SELECT 1`)
			return err
		})
		if !errors.Is(err, retry.ErrMaybeApplied) {
			t.Fatalf("read-only %v: err = %v; want maybe-applied", ro, err)
		}
		if want := map[bool]int{false: 1, true: 3}[ro]; runs != want {
			t.Errorf("read-only %v: %d runs; want %d", ro, runs, want)
		}
	}
}

// TestAttemptTimeout: a run cut short by the policy's AttemptTimeout
// before COMMIT is rolled back and run again, as retry.Do retries any
// attempt that ran out of its AttemptTimeout.
func TestAttemptTimeout(t *testing.T) {
	s := startPG(t)
	pool := newPool(t, newDB(t, s), 2)
	r, err := retrysql.New(retry.Policy{Initial: time.Millisecond, MaxDelay: 10 * time.Millisecond, MaxAttempts: 3,
		AttemptTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	err = r.PgxTx(context.Background(), pool, func(ctx context.Context, tx pgx.Tx) error {
		runs++
		if runs == 1 {
			_, err := tx.Exec(ctx, `SELECT pg_sleep(5)`)
			return err
		}
		_, err := tx.Exec(ctx, `SELECT 1`)
		return err
	})
	if err != nil || runs != 2 {
		t.Fatalf("err = %v after %d runs; want success after 2", err, runs)
	}
}

// TestPanic: a function that panics has its transaction rolled back and
// its connection given back to the pool; the panic reaches the caller.
func TestPanic(t *testing.T) {
	s := startPG(t)
	pool := newPool(t, newDB(t, s), 1)
	mustExec(t, pool, `CREATE TABLE k (id int PRIMARY KEY)`)
	r := quick(t)
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v; want boom", p)
			}
		}()
		r.PgxTx(context.Background(), pool, func(ctx context.Context, tx pgx.Tx) error {
			tx.Exec(ctx, `INSERT INTO k VALUES (1)`)
			panic("boom")
		})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM k`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("count = %d, %v; want 0 from the pool's one connection", n, err)
	}
}
