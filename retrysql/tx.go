package retrysql

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
	"github.com/retrykit/retry"
)

// PgxBeginner begins pgx transactions: *pgxpool.Pool and *pgx.Conn are
// ones. Its BeginTx must begin a new transaction on the server with the
// options given (not a savepoint in an outer transaction: a serialization
// failure aborts the whole of it, which only its owner can re-run).
type PgxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// SQLBeginner begins database/sql transactions: *sql.DB and *sql.Conn are
// ones. The driver's errors must expose the SQLSTATE through a method
// SQLState() string, as pgx's stdlib and lib/pq do.
type SQLBeginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// PgxTx runs fn in a transaction begun on db with the runner's isolation
// level and access mode, and commits it when fn returns nil. When fn or
// COMMIT fails with a serialization failure (40001) or a deadlock (40P01),
// or the transaction failed before its COMMIT was sent because nothing was
// sent or the connection was lost, it rolls back and runs the whole of fn
// again in a new transaction, after the Policy's wait, until a stop rule
// ends the call. Any other error of fn or of the server ends the call at
// once, after a rollback, unless the Policy's Retryable, when set, says to
// run fn again (nothing was committed). A COMMIT whose reply was lost ends the call with
// an error matching [retry.ErrMaybeApplied] and is never re-run (unless
// the runner is read-only).
//
// fn must do all its work through tx and ctx (the attempt's context), keep
// no effects outside the database that a re-run would repeat, and not
// commit or roll back tx itself. It returns nil on success, or a
// [*retry.Error] that wraps the last run's error (errors.As reaches the
// driver's *pgconn.PgError).
func (r *Runner) PgxTx(ctx context.Context, db PgxBeginner, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return retry.Do(ctx, r.policy, func(ctx context.Context) error {
		tx, err := db.BeginTx(ctx, r.pgxOpt)
		if err != nil {
			return judgeBody(ctx, "begin", err, r.widen)
		}
		// Rolls back when fn fails or panics; after COMMIT it does nothing.
		defer tx.Rollback(ctx)
		if err := fn(ctx, tx); err != nil {
			return judgeBody(ctx, "transaction", err, r.widen)
		}
		if err := tx.Commit(ctx); err != nil {
			var applied bool
			return judgeSent("commit", err, r.sqlOpt.ReadOnly, false, r.widen, &applied)
		}
		return nil
	})
}

// Tx is [Runner.PgxTx] for database/sql: it runs fn in a transaction begun
// on db (a *sql.DB or *sql.Conn) with the runner's isolation level and
// read-only flag, with the same rules. database/sql itself re-tries BeginTx
// on a connection that turns out bad (driver.ErrBadConn), which sends no
// work; it never re-tries a statement inside a transaction, nor Commit. A
// COMMIT that fails with driver.ErrBadConn is maybe-applied: lib/pq
// returns it after sending.
func (r *Runner) Tx(ctx context.Context, db SQLBeginner, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return retry.Do(ctx, r.policy, func(ctx context.Context) error {
		tx, err := db.BeginTx(ctx, &r.sqlOpt)
		if err != nil {
			return judgeBody(ctx, "begin", err, r.widen)
		}
		// Rolls back when fn fails or panics; after COMMIT it does nothing.
		defer tx.Rollback()
		if err := fn(ctx, tx); err != nil {
			return judgeBody(ctx, "transaction", err, r.widen)
		}
		if err := tx.Commit(); err != nil {
			var applied bool
			return judgeSent("commit", err, r.sqlOpt.ReadOnly, false, r.widen, &applied)
		}
		return nil
	})
}
