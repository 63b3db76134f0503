package retrysql_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

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
