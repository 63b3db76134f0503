package retrysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/retrykit/retry"
)

// TestJudge checks the classification table of docs/sql.md on errors
// built here; the tests against postgres check it on the real thing.
func TestJudge(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Code: code, Message: "m"} }
	ctx := context.Background()
	type want struct {
		retried, maybe, notSent bool
	}
	body := []struct {
		name string
		err  error
		want want
	}{
		{"40001", pg("40001"), want{retried: true}},
		{"40P01", pg("40P01"), want{retried: true}},
		{"23505", pg("23505"), want{}},
		{"57P01 admin shutdown", pg("57P01"), want{retried: true}},
		{"08006", pg("08006"), want{retried: true}},
		{"EOF", io.ErrUnexpectedEOF, want{retried: true}},
		{"bad conn", driver.ErrBadConn, want{retried: true}},
		{"own error", errors.New("insufficient funds"), want{}},
	}
	for _, c := range body {
		err := judgeBody(ctx, "transaction", c.err, false)
		got := want{!retry.IsPermanent(err), errors.Is(err, retry.ErrMaybeApplied), errors.Is(err, retry.ErrNotSent)}
		if got != c.want {
			t.Errorf("before COMMIT, %s: %+v; want %+v (%v)", c.name, got, c.want, err)
		}
	}
	sent := []struct {
		name       string
		err        error
		safe, bad  bool
		want       want
		appliedNow bool
	}{
		{"40001", pg("40001"), false, false, want{retried: true}, false},
		{"23505", pg("23505"), false, false, want{}, false},
		{"57P01 after COMMIT", pg("57P01"), false, false, want{maybe: true}, false},
		{"EOF", io.EOF, false, false, want{maybe: true}, false},
		{"EOF, safe", io.EOF, true, false, want{retried: true, maybe: true}, true},
		{"bad conn, lib/pq", driver.ErrBadConn, false, false, want{maybe: true}, false},
		{"bad conn, pgx stdlib", driver.ErrBadConn, false, true, want{retried: true, notSent: true}, false},
	}
	for _, c := range sent {
		var applied bool
		err := judgeSent("commit", c.err, c.safe, c.bad, false, &applied)
		got := want{!retry.IsPermanent(err), errors.Is(err, retry.ErrMaybeApplied), errors.Is(err, retry.ErrNotSent)}
		if got != c.want || applied != c.appliedNow {
			t.Errorf("sent, %s: %+v, applied %v; want %+v, %v (%v)", c.name, got, applied, c.want, c.appliedNow, err)
		}
	}
	// A later failure of a call whose earlier attempt may have been
	// applied says so.
	applied := true
	if err := judgeSent("exec", pg("23505"), true, false, false, &applied); !errors.Is(err, retry.ErrMaybeApplied) {
		t.Errorf("error reply after a lost one: %v; want maybe-applied", err)
	}
	if !(&runError{err: pg("53300")}).Overloaded() || (&runError{err: pg("40001")}).Overloaded() {
		t.Error("Overloaded: want true for 53300, false for 40001")
	}
}

// TestJudgeWiden: with the Policy's own Retryable (widen), an error the
// module's rule ends the call on is left to it when nothing may have been
// applied, and stays final when an earlier attempt may have been.
func TestJudgeWiden(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Code: code, Message: "m"} }
	ctx := context.Background()
	for _, err := range []error{pg("23505"), errors.New("insufficient funds")} {
		if got := judgeBody(ctx, "transaction", err, true); retry.IsPermanent(got) || got != err {
			t.Errorf("before COMMIT, widen, %v: %v; want the error itself, not permanent", err, got)
		}
	}
	var applied bool
	if got := judgeSent("exec", pg("23505"), false, false, true, &applied); retry.IsPermanent(got) {
		t.Errorf("exec error reply, widen, nothing applied: %v is permanent; want it left to Retryable", got)
	}
	applied = true
	if got := judgeSent("exec", pg("23505"), false, false, true, &applied); !retry.IsPermanent(got) || !errors.Is(got, retry.ErrMaybeApplied) {
		t.Errorf("exec error reply, widen, an earlier attempt maybe applied: %v; want permanent and maybe-applied", got)
	}
}
