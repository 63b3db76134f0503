package retrysql_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/lib/pq"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/pgfault"
	"github.com/retrykit/retry/retrysql"
)

// transferSQL is transfer for database/sql.
func transferSQL(ctx context.Context, tx *sql.Tx, m move) error {
	var b int64
	if err := tx.QueryRowContext(ctx, `SELECT balance FROM accounts WHERE id = $1`, m.from).Scan(&b); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - $2 WHERE id = $1`, m.from, m.amount); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + $2 WHERE id = $1`, m.to, m.amount); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO ledger VALUES ($1, $2, $3, $4)`, m.id, m.from, m.to, m.amount)
	return err
}

// proxied returns url with its host replaced by the proxy's.
func proxied(url, serverAddr string, p *pgfault.Proxy) string {
	return strings.Replace(url, serverAddr, p.Addr(), 1)
}

// lostOutcome counts how the transfers of a lost-reply run ended.
type lostOutcome struct {
	ok, maybe, other int
	maybeIDs         []int64
}

// runLost runs each move once through do, four workers at a time, and
// sorts the outcomes.
func runLost(t *testing.T, work [][]move, do func(ctx context.Context, m move) error) lostOutcome {
	t.Helper()
	var (
		mu  sync.Mutex
		out lostOutcome
		wg  sync.WaitGroup
	)
	for _, ms := range work {
		wg.Go(func() {
			for _, m := range ms {
				err := do(context.Background(), m)
				mu.Lock()
				switch {
				case err == nil:
					out.ok++
				case errors.Is(err, retry.ErrMaybeApplied):
					out.maybe++
					out.maybeIDs = append(out.maybeIDs, m.id)
				default:
					out.other++
					t.Errorf("transfer %d: %v", m.id, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// TestLostCommitReplies resets the connection after the server applied
// COMMIT in 20 % of transactions: through retrysql no transfer is applied
// twice, each of those is reported maybe-applied (and was applied), and
// every other one committed once. A naive loop that re-runs on a
// connection error applies the lost ones twice.
func TestLostCommitReplies(t *testing.T) {
	s := startPG(t)
	workers, each := 4, 10
	if fullWorkload() {
		each = 125 // 500 transfers
	}
	work := moves(workers, each, 7)
	total := workers * each
	r, err := retrysql.New(workloadPolicy())
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, admin *pgxpool.Pool, p *pgfault.Proxy, out lostOutcome) {
		t.Helper()
		counts := ledgerCounts(t, admin)
		for id, n := range counts {
			if n > 1 {
				t.Errorf("transfer %d applied %d times", id, n)
			}
		}
		for _, id := range out.maybeIDs {
			if counts[id] != 1 {
				t.Errorf("transfer %d reported maybe-applied, applied %d times (the proxy loses only applied COMMITs)", id, counts[id])
			}
		}
		if out.ok+out.maybe != total || len(counts) != total {
			t.Errorf("%d ok + %d maybe-applied, %d in the ledger; want %d", out.ok, out.maybe, len(counts), total)
		}
		if int64(out.maybe) != p.Lost() || out.maybe == 0 {
			t.Errorf("%d reported maybe-applied; the proxy lost %d COMMIT replies", out.maybe, p.Lost())
		}
		checkBalances(t, admin)
		t.Logf("%d transfers: %d committed and told so, %d maybe-applied (lost replies: %d), applied twice: 0; transactions begun %d, sessions %d",
			total, out.ok, out.maybe, p.Lost(), p.Begins(), p.Sessions())
	}
	setup := func(t *testing.T, eof bool) (string, *pgxpool.Pool, *pgfault.Proxy) {
		url := newDB(t, s)
		admin := newPool(t, url, 2)
		setupBank(t, admin)
		p := pgfault.Start(t, s.Addr(), pgfault.Config{Lose: 0.2, EOF: eof})
		return proxied(url, s.Addr(), p), admin, p
	}

	t.Run("pgx", func(t *testing.T) {
		url, admin, p := setup(t, false)
		pool := newPool(t, url, int32(workers))
		out := runLost(t, work, func(ctx context.Context, m move) error {
			return r.PgxTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error { return transfer(ctx, tx, m) })
		})
		check(t, admin, p, out)
	})
	for _, driver := range []string{"pgx", "postgres"} {
		t.Run("database/sql/"+driver, func(t *testing.T) {
			// lib/pq answers a connection closed after COMMIT with
			// driver.ErrBadConn, documented as "not performed": the
			// transfer was applied all the same.
			url, admin, p := setup(t, driver == "postgres")
			db, err := sql.Open(driver, url)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(workers)
			out := runLost(t, work, func(ctx context.Context, m move) error {
				return r.Tx(ctx, db, func(ctx context.Context, tx *sql.Tx) error { return transferSQL(ctx, tx, m) })
			})
			check(t, admin, p, out)
		})
	}

	// The naive loop re-runs on any error, up to 10 runs: each lost reply
	// becomes a transfer applied twice.
	t.Run("naive", func(t *testing.T) {
		url, admin, p := setup(t, false)
		pool := newPool(t, url, int32(workers))
		out := runLost(t, work, func(ctx context.Context, m move) error {
			var err error
			for range 10 {
				if err = pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error { return transfer(ctx, tx, m) }); err == nil {
					return nil
				}
			}
			return err
		})
		twice, extra := 0, 0
		for _, n := range ledgerCounts(t, admin) {
			if n > 1 {
				twice++
				extra += n - 1
			}
		}
		t.Logf("naive loop: %d transfers, %d told ok, %d applied more than once (%d extra applications; lost replies: %d)",
			total, out.ok, twice, extra, p.Lost())
		// Each lost reply is one extra application: the transfer ran again.
		if twice == 0 || int64(extra) != p.Lost() {
			t.Errorf("naive loop applied %d transfers %d extra times; want one per lost reply (%d)", twice, extra, p.Lost())
		}
	})
}
