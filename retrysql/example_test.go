package retrysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrysql"
)

// A transfer under SERIALIZABLE, re-run whole on serialization failures
// and deadlocks; a lost COMMIT reply is reported, not re-run.
func ExampleRunner_PgxTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1:5432/bank")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	r, err := retrysql.New(retry.Policy{Initial: 10 * time.Millisecond, MaxDelay: time.Second, MaxAttempts: 20},
		retrysql.WithIsolation(sql.LevelSerializable))
	if err != nil {
		log.Fatal(err)
	}
	err = r.PgxTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - 5 WHERE id = 1`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + 5 WHERE id = 2`)
		return err
	})
	switch {
	case errors.Is(err, retry.ErrMaybeApplied):
		log.Print("the transfer may have committed: look before trying again")
	case err != nil:
		log.Print(err)
	}
}

// database/sql: the same rules, any driver whose errors carry the SQLSTATE.
func ExampleRunner_Tx() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://app@127.0.0.1:5432/bank")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	r, err := retrysql.New(retry.Policy{Initial: 10 * time.Millisecond, MaxDelay: time.Second},
		retrysql.WithIsolation(sql.LevelRepeatableRead), retrysql.WithReadOnly())
	if err != nil {
		log.Fatal(err)
	}
	var total int64
	err = r.Tx(ctx, db, func(ctx context.Context, tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT sum(balance) FROM accounts`).Scan(&total)
	})
	if err != nil {
		log.Print(err)
	}
}

// A statement that is safe to repeat is marked so: it is sent again even
// when its reply was lost.
func ExampleMarkSafe() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1:5432/bank")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	r, err := retrysql.New(retry.Policy{Initial: 10 * time.Millisecond, MaxDelay: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	_, err = r.PgxExec(retrysql.MarkSafe(ctx), pool,
		`INSERT INTO events (id, body) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, "evt-1", "hello")
	if err != nil {
		log.Print(err)
	}
}

// An invalid policy is refused when the Runner is made, naming the field.
func ExampleNew() {
	_, err := retrysql.New(retry.Policy{Initial: time.Second, MaxDelay: time.Millisecond})
	fmt.Println(err)
	// Output: retrysql: New: retry: invalid policy: MaxDelay 1ms is below Initial 1s
}
