package retrysql_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The bank: accounts with balances, and a ledger of transfers with no
// unique key, so that a transfer applied twice shows as two rows.
const (
	accounts       = 10
	initialBalance = 1000
)

func setupBank(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	mustExec(t, pool,
		`CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL)`,
		`CREATE TABLE ledger (transfer_id bigint NOT NULL, from_id int NOT NULL, to_id int NOT NULL, amount bigint NOT NULL)`,
		`INSERT INTO accounts SELECT g, 1000 FROM generate_series(1, 10) g`)
}

// move is one transfer: its id, accounts and amount.
type move struct {
	id       int64
	from, to int
	amount   int64
}

// moves returns workers × each transfers between distinct random accounts,
// from a fixed seed, numbered from 1, worker by worker.
func moves(workers, each int, seed uint64) [][]move {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([][]move, workers)
	id := int64(0)
	for w := range out {
		for range each {
			id++
			from := 1 + r.IntN(accounts)
			to := 1 + r.IntN(accounts-1)
			if to >= from {
				to++
			}
			out[w] = append(out[w], move{id, from, to, 1 + r.Int64N(10)})
		}
	}
	return out
}

// transfer runs m in tx: it reads the source balance (so that concurrent
// transfers conflict under SERIALIZABLE), moves the amount and writes the
// ledger.
func transfer(ctx context.Context, tx pgx.Tx, m move) error {
	var b int64
	if err := tx.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = $1`, m.from).Scan(&b); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - $2 WHERE id = $1`, m.from, m.amount); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + $2 WHERE id = $1`, m.to, m.amount); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO ledger VALUES ($1, $2, $3, $4)`, m.id, m.from, m.to, m.amount)
	return err
}

// ledgerCounts returns how many times each transfer is in the ledger.
func ledgerCounts(t *testing.T, pool *pgxpool.Pool) map[int64]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT transfer_id, count(*) FROM ledger GROUP BY transfer_id`)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[int64]int{}
	for rows.Next() {
		var id int64
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		counts[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return counts
}

// checkBalances fails t unless the balances sum to what they started with
// and each equals its initial balance plus what the ledger moved in, less
// what it moved out.
func checkBalances(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var sum int64
	if err := pool.QueryRow(context.Background(), `SELECT sum(balance) FROM accounts`).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if sum != accounts*initialBalance {
		t.Errorf("balances sum to %d; want %d", sum, accounts*initialBalance)
	}
	var bad int
	err := pool.QueryRow(context.Background(), `
		SELECT count(*) FROM accounts a WHERE a.balance <> 1000
			- coalesce((SELECT sum(amount) FROM ledger WHERE from_id = a.id), 0)
			+ coalesce((SELECT sum(amount) FROM ledger WHERE to_id = a.id), 0)`).Scan(&bad)
	if err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Errorf("%d accounts' balances do not match their ledger", bad)
	}
}

// sqlstate returns err's SQLSTATE, or "".
func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
