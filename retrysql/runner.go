package retrysql

import (
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/retrykit/retry"
)

// Option configures [New].
type Option interface{ apply(*config) }

// config is what the options set; its zero value is every default: the
// server's default isolation level, read-write.
type config struct {
	isolation    sql.IsolationLevel
	isolationSet bool
	readOnly     bool
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithIsolation sets the isolation level of the runner's transactions:
// sql.LevelReadUncommitted, LevelReadCommitted, LevelRepeatableRead or
// LevelSerializable (PostgreSQL runs read uncommitted as read committed).
// The default, and sql.LevelDefault, is the server's
// default_transaction_isolation (read committed unless changed). New
// refuses other levels. Serialization failures (40001) happen under
// repeatable read and serializable; deadlocks (40P01) under any level.
func WithIsolation(level sql.IsolationLevel) Option {
	return optionFunc(func(c *config) { c.isolation, c.isolationSet = level, true })
}

// WithReadOnly makes the runner's transactions READ ONLY: the server
// refuses any write in them, so a transaction whose COMMIT reply was lost
// applied nothing and is re-run like one whose COMMIT was not sent. By
// default transactions are read-write.
func WithReadOnly() Option {
	return optionFunc(func(c *config) { c.readOnly = true })
}

// Runner runs PostgreSQL transactions and single statements through the
// core's retry loop ([retry.Do]) with one Policy: waits, stop rules,
// Budget, Throttle, Observer and Logger are the Policy's, and every run of
// a transaction is one attempt. What is re-run, and when a call ends with
// an error matching [retry.ErrMaybeApplied] instead, is in the package
// documentation.
//
// Get one with [New]. The zero Runner is usable: it retries with the zero
// Policy, in transactions with the server's defaults. A Runner is
// immutable and safe for concurrent use; make one per kind of transaction
// (isolation level, read-only) and share it.
type Runner struct {
	policy retry.Policy
	widen  bool // policy.Retryable is set: it judges what the module's rule would end
	pgxOpt pgx.TxOptions
	sqlOpt sql.TxOptions
}

// New returns a Runner that retries with p. It returns an error wrapping
// that of p.Validate for an invalid p (naming the field), and an error for an
// isolation level PostgreSQL does not have. Every Policy field is honoured
// as [retry.Do] honours it; an AttemptTimeout bounds one run of a
// transaction, its COMMIT included (a COMMIT it cuts short is
// maybe-applied).
func New(p retry.Policy, opts ...Option) (*Runner, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("retrysql: New: %w", err)
	}
	var c config
	for _, o := range opts {
		o.apply(&c)
	}
	r := &Runner{policy: p, widen: p.Retryable != nil}
	switch c.isolation {
	case sql.LevelDefault:
	case sql.LevelReadUncommitted:
		r.pgxOpt.IsoLevel = pgx.ReadUncommitted
	case sql.LevelReadCommitted:
		r.pgxOpt.IsoLevel = pgx.ReadCommitted
	case sql.LevelRepeatableRead:
		r.pgxOpt.IsoLevel = pgx.RepeatableRead
	case sql.LevelSerializable:
		r.pgxOpt.IsoLevel = pgx.Serializable
	default:
		return nil, fmt.Errorf("retrysql: New: WithIsolation(%v): PostgreSQL has no such isolation level", c.isolation)
	}
	r.sqlOpt.Isolation = c.isolation
	if c.readOnly {
		r.pgxOpt.AccessMode = pgx.ReadOnly
		r.sqlOpt.ReadOnly = true
	}
	return r, nil
}
