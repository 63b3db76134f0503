package retrysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/retrykit/retry"
)

// outcome says what is known about one failed run.
type outcome uint8

const (
	// outcomeRolledBack: the server rolled the transaction (or the
	// statement's own) back and says to run it again: 40001, 40P01.
	outcomeRolledBack outcome = iota + 1
	// outcomeNotSent: nothing reached the server.
	outcomeNotSent
	// outcomeLostBeforeCommit: the connection was lost inside a
	// transaction before its COMMIT was sent: the server rolls it back.
	outcomeLostBeforeCommit
	// outcomeMaybeApplied: a COMMIT or a single statement was sent and
	// its reply lost.
	outcomeMaybeApplied
)

// runError is the error of a run that retrysql classified. It wraps the
// driver's error, so errors.As reaches a *pgconn.PgError or *pq.Error,
// and matches retry.ErrNotSent or retry.ErrMaybeApplied as the case may be.
type runError struct {
	op      string // "begin", "commit", "transaction", "exec"
	err     error
	outcome outcome
	earlier bool // an earlier attempt of the call may have been applied
}

func (e *runError) Error() string {
	var what string
	if e.earlier && e.outcome != outcomeMaybeApplied {
		what = "may have been applied by an earlier attempt, then "
	}
	switch e.outcome {
	case outcomeRolledBack:
		what += "rolled back by the server: "
	case outcomeNotSent:
		what += "not sent: "
	case outcomeLostBeforeCommit:
		what += "connection lost before COMMIT, not committed: "
	case outcomeMaybeApplied:
		if e.op == "commit" {
			what = "COMMIT sent, reply lost: may have been applied: "
		} else {
			what = "sent, reply lost: may have been applied: "
		}
	}
	return "retrysql: " + e.op + ": " + what + e.err.Error()
}

func (e *runError) Unwrap() error { return e.err }

// Is matches retry.ErrNotSent and retry.ErrMaybeApplied.
func (e *runError) Is(target error) bool {
	switch target {
	case retry.ErrNotSent:
		return e.outcome == outcomeNotSent && !e.earlier
	case retry.ErrMaybeApplied:
		return e.outcome == outcomeMaybeApplied || e.earlier
	}
	return false
}

// Overloaded reports whether the failure says the server cannot take the
// work now: SQLSTATE class 53 (insufficient resources, among them
// too_many_connections), 57P03 (cannot_connect_now), or a timeout. A
// retry.Throttle counts such runs as rejections by its default rule.
func (e *runError) Overloaded() bool {
	if code, ok := sqlState(e.err); ok && (len(code) == 5 && code[:2] == "53" || code == "57P03") {
		return true
	}
	return pgconn.Timeout(e.err)
}

// sqlState returns the SQLSTATE of err, from any error in its chain with a
// method SQLState() string (pgx's *pgconn.PgError, lib/pq's *pq.Error).
func sqlState(err error) (string, bool) {
	var s interface{ SQLState() string }
	if errors.As(err, &s) {
		return s.SQLState(), true
	}
	return "", false
}

// rerun reports whether SQLSTATE code says the server rolled the work back
// and expects it run again: serialization_failure and deadlock_detected.
func rerun(code string) bool { return code == "40001" || code == "40P01" }

// connectionEnded reports whether SQLSTATE code says the server ended the
// session: class 08 (connection exception), admin_shutdown,
// crash_shutdown, cannot_connect_now. Before COMMIT the transaction is
// rolled back with it; in reply to COMMIT it may come after the commit.
func connectionEnded(code string) bool {
	return len(code) == 5 && code[:2] == "08" || code == "57P01" || code == "57P02" || code == "57P03"
}

// connectFailed reports whether err is pgx's failure to connect, which
// sent nothing of the transaction or statement (even when the server's
// refusal, such as too_many_connections, carries a SQLSTATE).
func connectFailed(err error) bool {
	var ce *pgconn.ConnectError
	return errors.As(err, &ce)
}

// notSent reports whether err says that nothing was sent: an error in its
// chain says so (pgconn.SafeToRetry's rule: a method SafeToRetry() bool),
// or the connection could not be made (pgconn's *ConnectError, a dial's
// *net.OpError).
func notSent(err error) bool {
	var s interface{ SafeToRetry() bool }
	if errors.As(err, &s) && s.SafeToRetry() {
		return true
	}
	if connectFailed(err) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// connLost reports whether err says the connection broke: a network
// error, an end of stream, database/sql's bad or done connection.
func connLost(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone)
}

// judgeBody classifies the error of BEGIN or of the transaction's
// function, before COMMIT was sent: the transaction did not commit. A
// serialization failure or deadlock, nothing sent, or a lost connection
// (the server rolls back a transaction whose connection ends) re-run it;
// anything else, an error of the function's own included, ends the call,
// unless widen (the Policy has its own Retryable, which then judges it:
// nothing committed, so a re-run cannot apply anything twice).
//
// When ctx has ended the error is returned as it is: the loop stops if the
// caller's context ended, and re-runs if only the attempt's AttemptTimeout
// did.
func judgeBody(ctx context.Context, op string, err error, widen bool) error {
	if connectFailed(err) {
		return &runError{op: op, err: err, outcome: outcomeNotSent}
	}
	if code, ok := sqlState(err); ok {
		switch {
		case rerun(code):
			return &runError{op: op, err: err, outcome: outcomeRolledBack}
		case connectionEnded(code):
			return &runError{op: op, err: err, outcome: outcomeLostBeforeCommit}
		}
		return final(err, widen)
	}
	if ctx.Err() != nil {
		return err
	}
	if notSent(err) {
		return &runError{op: op, err: err, outcome: outcomeNotSent}
	}
	if connLost(err) {
		return &runError{op: op, err: err, outcome: outcomeLostBeforeCommit}
	}
	return final(err, widen)
}

// judgeSent classifies the error of a COMMIT or of a single statement:
// an error reply (a SQLSTATE) means the server answered; 40001 and 40P01
// re-run. Nothing sent re-runs. Anything else (a lost connection, a
// timeout, a context ended while waiting) leaves the outcome unknown: it
// re-runs only when safe (a read-only transaction, a statement marked
// with MarkSafe) and otherwise ends the call with a maybe-applied error.
// badConnNotSent says the driver returns driver.ErrBadConn only before
// sending (pgx's stdlib). *applied records that an attempt of the call may
// have been applied. An error reply of an attempt when none may have been
// applied is left to the Policy's Retryable when widen, as in judgeBody.
func judgeSent(op string, err error, safe, badConnNotSent, widen bool, applied *bool) error {
	if code, ok := sqlState(err); ok && !connectionEnded(code) && !connectFailed(err) {
		if rerun(code) {
			return &runError{op: op, err: err, outcome: outcomeRolledBack, earlier: *applied}
		}
		if *applied {
			return retry.Permanent(&runError{op: op, err: err, earlier: true})
		}
		return final(err, widen)
	}
	if notSent(err) || badConnNotSent && err == driver.ErrBadConn {
		return &runError{op: op, err: err, outcome: outcomeNotSent, earlier: *applied}
	}
	re := &runError{op: op, err: err, outcome: outcomeMaybeApplied}
	if !safe {
		return retry.Permanent(re)
	}
	*applied = true
	return re
}

// final is err as an error the module's rule does not re-run: marked
// permanent, or, when widen, left for the Policy's Retryable to judge.
func final(err error, widen bool) error {
	if widen {
		return err
	}
	return retry.Permanent(err)
}
