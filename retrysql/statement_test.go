package retrysql_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/pgfault"
	"github.com/retrykit/retry/internal/pgtest"
	"github.com/retrykit/retry/retrysql"
)

// seen counts the statements the server logged that contain mark: each
// time it received one (log_statement=all), whatever became of it.
func seen(s *pgtest.Server, mark string) int {
	return strings.Count(s.Log(), mark)
}

func quick(t *testing.T, opts ...retrysql.Option) *retrysql.Runner {
	t.Helper()
	r, err := retrysql.New(retry.Policy{Initial: time.Millisecond, MaxDelay: 10 * time.Millisecond, MaxAttempts: 3}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestExecLostReply loses the reply of an autocommit INSERT (the server
// applied it) and counts at the server how often it was sent. Through
// retrysql it is sent once and reported maybe-applied, with pgx and with
// database/sql (whose own re-sending on driver.ErrBadConn it bypasses);
// marked safe, it is sent again and succeeds. database/sql alone, with
// lib/pq, sends it twice and reports success.
func TestExecLostReply(t *testing.T) {
	s := startPG(t)
	url := newDB(t, s)
	admin := newPool(t, url, 2)
	mustExec(t, admin, `CREATE TABLE events (id text PRIMARY KEY)`)
	rows := func(id string) int {
		var n int
		if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	ctx := context.Background()
	r := quick(t)

	t.Run("pgx", func(t *testing.T) {
		p := pgfault.Start(t, s.Addr(), pgfault.Config{Lose: 1, Tag: "INSERT"})
		pool := newPool(t, proxied(url, s.Addr(), p), 1)
		_, err := r.PgxExec(ctx, pool, `INSERT INTO events VALUES ('pgx-1') /* mark-pgx-1 */`)
		if !errors.Is(err, retry.ErrMaybeApplied) || errors.Is(err, retry.ErrNotSent) {
			t.Fatalf("err = %v; want maybe-applied", err)
		}
		if n := seen(s, "mark-pgx-1"); n != 1 {
			t.Errorf("server saw the INSERT %d times; want 1", n)
		}
		if n := rows("pgx-1"); n != 1 {
			t.Errorf("%d rows; want 1 (the proxy loses only applied replies)", n)
		}
	})
	t.Run("pgx/safe", func(t *testing.T) {
		p := pgfault.Start(t, s.Addr(), pgfault.Config{Lose: 0.5, Tag: "INSERT"})
		pool := newPool(t, proxied(url, s.Addr(), p), 1)
		// Lose 0.5 loses the second INSERT's reply, then not the third.
		if _, err := pool.Exec(ctx, `INSERT INTO events VALUES ('pgx-0') ON CONFLICT DO NOTHING`); err != nil {
			t.Fatal(err)
		}
		_, err := r.PgxExec(retrysql.MarkSafe(ctx), pool, `INSERT INTO events VALUES ('pgx-2') ON CONFLICT DO NOTHING /* mark-pgx-2 */`)
		if err != nil {
			t.Fatalf("marked safe: %v", err)
		}
		if n := seen(s, "mark-pgx-2"); n != 2 {
			t.Errorf("server saw the INSERT %d times; want 2", n)
		}
		if n := rows("pgx-2"); n != 1 {
			t.Errorf("%d rows; want 1", n)
		}
	})
	for _, driver := range []string{"pgx", "postgres"} {
		t.Run("database/sql/"+driver, func(t *testing.T) {
			// EOF: lib/pq turns an end of stream into driver.ErrBadConn,
			// on which DB.ExecContext would send the statement again.
			p := pgfault.Start(t, s.Addr(), pgfault.Config{Lose: 1, Tag: "INSERT", EOF: true})
			db, err := sql.Open(driver, proxied(url, s.Addr(), p))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			id := "sql-" + driver
			_, err = r.Exec(ctx, db, `INSERT INTO events VALUES ($1) /* mark-`+id+` */`, id)
			if !errors.Is(err, retry.ErrMaybeApplied) {
				t.Fatalf("err = %v; want maybe-applied", err)
			}
			if n := seen(s, "mark-"+id+" "); n != 1 {
				t.Errorf("server saw the INSERT %d times; want 1", n)
			}
		})
	}
	// database/sql alone, with lib/pq: the reply lost with an end of
	// stream comes back as driver.ErrBadConn, and DB.ExecContext sends
	// the statement again on another connection: applied twice, and the
	// caller is told it went well.
	t.Run("database/sql/postgres/bare", func(t *testing.T) {
		mustExec(t, admin, `CREATE TABLE log (id text NOT NULL)`)
		p := pgfault.Start(t, s.Addr(), pgfault.Config{Lose: 0.5, Tag: "INSERT", EOF: true})
		db, err := sql.Open("postgres", proxied(url, s.Addr(), p))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		// Lose 0.5 passes this one, loses the next reply, then not.
		if _, err := db.ExecContext(ctx, `INSERT INTO log VALUES ('first')`); err != nil {
			t.Fatal(err)
		}
		_, err = db.ExecContext(ctx, `INSERT INTO log VALUES ('bare') /* mark-bare */`)
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM log WHERE id = 'bare'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		t.Logf("DB.ExecContext with lib/pq, reply lost: err = %v; sent %d times, %d rows", err, seen(s, "mark-bare"), n)
		if err != nil || n != 2 || seen(s, "mark-bare") != 2 {
			t.Errorf("err = %v, sent %d times, %d rows; want database/sql's own re-send: nil, 2, 2", err, seen(s, "mark-bare"), n)
		}
	})
}

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

// TestNew: an invalid policy or isolation level is an error naming it.
func TestNew(t *testing.T) {
	if _, err := retrysql.New(retry.Policy{MaxAttempts: -2}); !errors.Is(err, retry.ErrInvalidPolicy) || !strings.Contains(err.Error(), "MaxAttempts") {
		t.Errorf("MaxAttempts -2: err = %v; want an invalid policy naming MaxAttempts", err)
	}
	if _, err := retrysql.New(retry.Policy{}, retrysql.WithIsolation(sql.LevelLinearizable)); err == nil || !strings.Contains(err.Error(), "WithIsolation") {
		t.Errorf("LevelLinearizable: err = %v; want an error naming WithIsolation", err)
	}
	if _, err := retrysql.New(retry.Policy{}, retrysql.WithIsolation(sql.LevelSerializable), retrysql.WithReadOnly()); err != nil {
		t.Errorf("serializable read-only: %v", err)
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
