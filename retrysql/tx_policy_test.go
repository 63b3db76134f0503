package retrysql_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/retrysql"
	"github.com/retrykit/retry/retrytest"
)

// TestPolicySeesEveryRun: a transaction whose first run fails with a
// serialization failure (40001) runs twice, and the Policy's Budget,
// Throttle, Observer and Logger each see both runs.
//
// The Budget (ratio 2, no floor) lets the retry through only because the
// first run earned two, and has exactly one left after the call: one
// first attempt recorded, one retry withdrawn. The Throttle was fed
// eight rejections before the call and forced to let attempts through; its
// rejection probability afterwards, (requests − K × accepts) /
// (requests + 1), says it counted both runs as accepted (a 40001 is not
// overload). The Recorder saw two attempts, one retry and the end; the
// Logger wrote one retry line and no giving-up line.
func TestPolicySeesEveryRun(t *testing.T) {
	pool := newPool(t, newDB(t, startPG(t)), 2)
	mustExec(t, pool, `CREATE TABLE kv (k int PRIMARY KEY, v int NOT NULL)`, `INSERT INTO kv VALUES (1, 0)`)

	budget, err := retry.NewBudget(retry.BudgetConfig{Ratio: 2, MinPerSecond: -1, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	const k, rejected = 2.0, 8
	throttle, err := retry.NewThrottle(retry.ThrottleConfig{K: k, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for range rejected {
		account.Record(throttle, false)
	}
	throttle.Override(retry.ThrottleAllowAll)
	var rec retrytest.Recorder
	var logs bytes.Buffer
	r, err := retrysql.New(retry.Policy{
		Initial: time.Millisecond, MaxDelay: 10 * time.Millisecond, MaxAttempts: 3,
		Budget: budget, Throttle: throttle, Observer: &rec,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}

	runs := 0
	err = r.PgxTx(context.Background(), pool, func(ctx context.Context, tx pgx.Tx) error {
		runs++
		if _, err := tx.Exec(ctx, `UPDATE kv SET v = v + 1 WHERE k = 1`); err != nil {
			return err
		}
		if runs == 1 {
			return &pgconn.PgError{Code: "40001", Message: "could not serialize access"}
		}
		return nil
	})
	if err != nil || runs != 2 {
		t.Fatalf("err = %v after %d runs; want success after 2", err, runs)
	}
	var v int
	if err := pool.QueryRow(context.Background(), `SELECT v FROM kv WHERE k = 1`).Scan(&v); err != nil || v != 1 {
		t.Fatalf("v = %d, %v; want 1 (the first run rolled back)", v, err)
	}

	if left := []bool{account.AllowRetry(budget), account.AllowRetry(budget)}; !left[0] || left[1] {
		t.Errorf("Budget: retries allowed after the call %v; want [true false] (2 earned by one first run, 1 spent)", left)
	}
	throttle.Override(retry.ThrottleAuto)
	requests, accepts := float64(rejected+2), 2.0
	if got, want := throttle.Probability(), (requests-k*accepts)/(requests+1); got != want {
		t.Errorf("Throttle: probability %v; want %v (both runs counted as accepted)", got, want)
	}
	if a, n, d := rec.Attempts(), rec.Count(retry.EventRetry), rec.Count(retry.EventDone); a != 2 || n != 1 || d != 1 {
		t.Errorf("Observer: %d attempts, %d retries, %d ends; want 2, 1, 1 (%v)", a, n, d, rec.Kinds())
	}
	if done, ok := rec.Done(); !ok || done.Attempt != 2 || done.Err != nil {
		t.Errorf("Observer: end %+v, %v; want success after 2 attempts", done, ok)
	}
	if n := strings.Count(logs.String(), "retry: attempt failed, retrying"); n != 1 || strings.Contains(logs.String(), "giving up") {
		t.Errorf("Logger: %d retry lines; want 1 and no giving up:\n%s", n, logs.String())
	}
}

// TestRetryableWidens: a Policy's Retryable judges the errors the module's
// own rule ends the call on, when nothing may have been applied: here a
// unique violation (23505) of the first run and the function's own error
// of the second are re-run because Retryable says so, and the third run
// commits once. Without Retryable the first error ends the call.
func TestRetryableWidens(t *testing.T) {
	pool := newPool(t, newDB(t, startPG(t)), 2)
	mustExec(t, pool, `CREATE TABLE kv (k int PRIMARY KEY, v int NOT NULL)`, `INSERT INTO kv VALUES (1, 0)`)
	errBusy := errors.New("inventory busy")
	run := func(p retry.Policy) (int, error) {
		r, err := retrysql.New(p)
		if err != nil {
			t.Fatal(err)
		}
		runs := 0
		err = r.PgxTx(context.Background(), pool, func(ctx context.Context, tx pgx.Tx) error {
			runs++
			if _, err := tx.Exec(ctx, `UPDATE kv SET v = v + 1 WHERE k = 1`); err != nil {
				return err
			}
			switch runs {
			case 1:
				_, err := tx.Exec(ctx, `INSERT INTO kv VALUES (1, 0)`) // 23505
				return err
			case 2:
				return errBusy
			}
			return nil
		})
		return runs, err
	}
	base := retry.Policy{Initial: time.Millisecond, MaxDelay: time.Millisecond, MaxAttempts: 5}
	runs, err := run(base)
	var pe *pgconn.PgError
	if runs != 1 || !errors.As(err, &pe) || pe.Code != "23505" {
		t.Fatalf("without Retryable: %d runs, %v; want 1 run ending with 23505", runs, err)
	}
	widened := base
	widened.Retryable = func(err error) bool {
		return errors.As(err, &pe) && pe.Code == "23505" || errors.Is(err, errBusy)
	}
	if runs, err := run(widened); runs != 3 || err != nil {
		t.Fatalf("with Retryable: %d runs, %v; want success after 3", runs, err)
	}
	var v int
	if err := pool.QueryRow(context.Background(), `SELECT v FROM kv WHERE k = 1`).Scan(&v); err != nil || v != 1 {
		t.Fatalf("v = %d, %v; want 1 (only the last run committed)", v, err)
	}
}
