// Package retrysql runs PostgreSQL transactions and single statements
// through retrykit's retry loop, with pgx v5 (*pgxpool.Pool, *pgx.Conn)
// or database/sql (*sql.DB, *sql.Conn; pgx's stdlib or lib/pq).
//
// PostgreSQL aborts a transaction with SQLSTATE 40001 (serialization
// failure, under REPEATABLE READ and SERIALIZABLE) or 40P01 (deadlock)
// and expects the application to run the whole transaction again. A
// [Runner] does that: [Runner.PgxTx] and [Runner.Tx] run a function in a
// transaction and, on those errors or on a failure before COMMIT was sent
// (nothing sent, or the connection lost: the server rolls the transaction
// back), roll back, wait as the [retry.Policy] says and run the whole
// function again. A COMMIT whose reply was lost may have committed: the
// call ends with an error matching [retry.ErrMaybeApplied], and is never
// re-run, so that nothing is applied twice. A call that failed each time
// before anything was sent matches [retry.ErrNotSent].
//
// Single statements outside a transaction ([Runner.PgxExec],
// [Runner.Exec]) are run again only when nothing was sent, when the server
// rolled them back (40001, 40P01), or, for a statement whose context
// carries [MarkSafe], also when their reply was lost.
//
// Every run of a transaction or statement is one attempt of [retry.Do]:
// the Policy's waits and stop rules, its Budget, Throttle, Observer and
// Logger see each one, and a call that gives up returns the core's
// [*retry.Error], which wraps the last run's error (errors.As reaches the
// driver's *pgconn.PgError or *pq.Error).
//
// One retry layer: pgx retries nothing by itself. database/sql re-tries an
// operation on driver.ErrBadConn, up to three times in all; retrysql keeps
// those re-tries from sending a statement twice by running single
// statements on a connection of their own (db.Conn), where database/sql
// does not re-try, and leaves them on for BeginTx, which sends no work.
//
// Nothing is added to the wire: the statements are the caller's, and
// BEGIN carries the isolation level and access mode of [WithIsolation]
// and [WithReadOnly].
//
// The rules as a table, the figures measured against a real PostgreSQL
// and how to reproduce them are in docs/sql.md of the repository.
package retrysql
