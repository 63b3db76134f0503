package retrysql

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/retrykit/retry"
)

// safeKey is the context key of MarkSafe.
type safeKey struct{}

// MarkSafe returns a context that marks the statement run with it (by
// [Runner.Exec] or [Runner.PgxExec]) as safe to repeat: the caller knows
// that applying it twice does no harm (a SELECT, an UPDATE that sets a
// value, an INSERT ... ON CONFLICT DO NOTHING with a key of the caller's).
// Such a statement is also run again when its reply was lost. Use it per
// call. It has no effect on transactions, whose COMMIT is never repeated
// (see [WithReadOnly] for those that write nothing).
func MarkSafe(ctx context.Context) context.Context {
	return context.WithValue(ctx, safeKey{}, true)
}

func markedSafe(ctx context.Context) bool {
	v, _ := ctx.Value(safeKey{}).(bool)
	return v
}

// PgxExecer runs single statements outside a transaction: *pgxpool.Pool
// and *pgx.Conn are ones.
type PgxExecer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// PgxExec runs one statement on db, outside a transaction (PostgreSQL runs
// it in one of its own), and runs it again, after the Policy's wait, only
// when doing so cannot apply it twice: nothing was sent, or the server
// rolled it back with 40001 or 40P01; or, when ctx carries [MarkSafe],
// also when its reply was lost. Otherwise a lost reply ends the call with
// an error matching [retry.ErrMaybeApplied], and an error reply ends it
// at once unless the Policy's Retryable, when set, retries it (only while
// no attempt may have been applied). The runner's transaction options do
// not apply.
func (r *Runner) PgxExec(ctx context.Context, db PgxExecer, sql string, args ...any) (pgconn.CommandTag, error) {
	safe := markedSafe(ctx)
	var (
		tag     pgconn.CommandTag
		applied bool
	)
	err := retry.Do(ctx, r.policy, func(ctx context.Context) error {
		var err error
		tag, err = db.Exec(ctx, sql, args...)
		if err != nil {
			return judgeSent("exec", err, safe, false, r.widen, &applied)
		}
		return nil
	})
	return tag, keepApplied(err, applied)
}

// Exec is [Runner.PgxExec] for database/sql, with the same rules. Each
// attempt takes one connection from db (db.Conn) and runs the statement on
// it: database/sql's DB.ExecContext would send the statement again by
// itself on driver.ErrBadConn, which lib/pq returns even after sending,
// and apply it twice. A driver.ErrBadConn of the statement counts as not
// sent only with pgx's stdlib driver, which returns it only then.
func (r *Runner) Exec(ctx context.Context, db *sql.DB, query string, args ...any) (sql.Result, error) {
	safe := markedSafe(ctx)
	var (
		res     sql.Result
		applied bool
	)
	err := retry.Do(ctx, r.policy, func(ctx context.Context) error {
		c, err := db.Conn(ctx)
		if err != nil {
			// database/sql re-tries a bad connection by itself here: no
			// statement was sent.
			return judgeBody(ctx, "exec", err, r.widen)
		}
		defer c.Close()
		res, err = c.ExecContext(ctx, query, args...)
		if err != nil {
			_, pgxDriver := db.Driver().(*stdlib.Driver)
			return judgeSent("exec", err, safe, pgxDriver, r.widen, &applied)
		}
		return nil
	})
	return res, keepApplied(err, applied)
}

// keepApplied returns err, the loop's, saying that the statement may have
// been applied when an attempt lost its reply (applied) and the loop then
// ended on an error that does not say so (a Throttle's rejection, the
// context).
func keepApplied(err error, applied bool) error {
	if err == nil || !applied || errors.Is(err, retry.ErrMaybeApplied) {
		return err
	}
	return &runError{op: "exec", err: err, earlier: true}
}
