// Command sql shows retrysql under contention: workers move money between
// a few accounts in SERIALIZABLE transactions on a real PostgreSQL (started
// here on a free loopback port from Debian's postgresql package), once
// with no retry and once through a retrysql.Runner, and prints what each
// committed. It exits with status 1 unless the runner committed every
// transfer exactly once and the books balance.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/pgtest"
	"github.com/retrykit/retry/retrysql"
)

const (
	workers  = 8
	each     = 50
	accounts = 5
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sql:", err)
		os.Exit(1)
	}
}

func run() error {
	srv, err := pgtest.Launch("deadlock_timeout=100ms")
	if err != nil {
		return err
	}
	defer srv.Close()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, srv.URL("postgres"))
	if err != nil {
		return err
	}
	defer pool.Close()

	r, err := retrysql.New(retry.Policy{Initial: 10 * time.Millisecond, MaxDelay: time.Second, MaxAttempts: retry.Unlimited,
		MaxElapsed: time.Minute}, retrysql.WithIsolation(sql.LevelSerializable))
	if err != nil {
		return err
	}
	serializable := pgx.TxOptions{IsoLevel: pgx.Serializable}
	ways := []struct {
		name string
		run  func(ctx context.Context, fn func(context.Context, pgx.Tx) error) error
	}{
		{"no retry", func(ctx context.Context, fn func(context.Context, pgx.Tx) error) error {
			return pgx.BeginTxFunc(ctx, pool, serializable, func(tx pgx.Tx) error { return fn(ctx, tx) })
		}},
		{"retrysql", func(ctx context.Context, fn func(context.Context, pgx.Tx) error) error {
			return r.PgxTx(ctx, pool, fn)
		}},
	}
	fmt.Printf("%d workers × %d transfers between %d accounts, SERIALIZABLE\n", workers, each, accounts)
	for _, w := range ways {
		if err := reset(ctx, pool); err != nil {
			return err
		}
		var committed, runs, failed atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for i := range workers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(i), 38))
				for j := range each {
					id := int64(i*each + j + 1)
					from := 1 + rng.IntN(accounts)
					to := 1 + (from+rng.IntN(accounts-1))%accounts
					amount := 1 + rng.Int64N(10)
					err := w.run(ctx, func(ctx context.Context, tx pgx.Tx) error {
						runs.Add(1) // a re-run moves the same amount: fn keeps no state of its own
						return transfer(ctx, tx, id, from, to, amount)
					})
					var pe *pgconn.PgError
					switch {
					case err == nil:
						committed.Add(1)
					case errors.As(err, &pe):
						failed.Add(1)
					default:
						fmt.Fprintln(os.Stderr, "sql:", w.name, err)
						failed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		fmt.Printf("  %-9s committed %4d of %d, failed %4d, transactions run %5d, %v\n", w.name+":",
			committed.Load(), workers*each, failed.Load(), runs.Load(), time.Since(start).Round(time.Millisecond))
		if err := check(ctx, pool, committed.Load()); err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		if w.name == "retrysql" && committed.Load() != workers*each {
			return fmt.Errorf("retrysql committed %d of %d transfers", committed.Load(), workers*each)
		}
	}
	return nil
}

func reset(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, `
		DROP TABLE IF EXISTS accounts, ledger;
		CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
		CREATE TABLE ledger (transfer_id bigint NOT NULL, from_id int NOT NULL, to_id int NOT NULL, amount bigint NOT NULL);
		INSERT INTO accounts SELECT g, 1000 FROM generate_series(1, 5) g`)
	return err
}

// transfer reads the source balance, moves amount and writes the ledger.
func transfer(ctx context.Context, tx pgx.Tx, id int64, from, to int, amount int64) error {
	var b int64
	if err := tx.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = $1`, from).Scan(&b); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - $2 WHERE id = $1`, from, amount); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + $2 WHERE id = $1`, to, amount); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO ledger VALUES ($1, $2, $3, $4)`, id, from, to, amount)
	return err
}

// check verifies that each committed transfer is in the ledger once and
// that every balance matches the ledger.
func check(ctx context.Context, pool *pgxpool.Pool, committed int64) error {
	var rows, distinct, sum, bad int64
	err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT transfer_id) FROM ledger`).Scan(&rows, &distinct)
	if err != nil {
		return err
	}
	if rows != committed || distinct != committed {
		return fmt.Errorf("%d ledger rows for %d transfers, %d reported committed", rows, distinct, committed)
	}
	err = pool.QueryRow(ctx, `SELECT sum(balance), count(*) FILTER (WHERE balance <> 1000
		- coalesce((SELECT sum(amount) FROM ledger WHERE from_id = a.id), 0)
		+ coalesce((SELECT sum(amount) FROM ledger WHERE to_id = a.id), 0)) FROM accounts a`).Scan(&sum, &bad)
	if err != nil {
		return err
	}
	if sum != accounts*1000 || bad != 0 {
		return fmt.Errorf("balances sum to %d (want %d), %d do not match the ledger", sum, accounts*1000, bad)
	}
	return nil
}
