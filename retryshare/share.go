package retryshare

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/fleet"
)

// ErrNoScript is what a [Store]'s EvalSHA returns, or wraps, when the server
// does not know the script (a NOSCRIPT reply): the Share then loads it again.
var ErrNoScript = fleet.ErrNoScript

// Store adapts a client of a Redis-compatible server to a [Share]. Get one
// from retryredis.ShareStore or retryvalkey.ShareStore, whose syncs skip
// the retry layer of that package: they are not retried (the next sync is
// the retry) and count neither in the policy's Budget nor in its Throttle.
// Both give a nil Store for a nil client, which Budget and Throttle refuse.
// Implement it for another client. A Share calls it from its one goroutine
// while the client serves others; every call must honour ctx.
type Store interface {
	// Load loads script into the server's script cache (SCRIPT LOAD) and
	// returns its SHA-1. On a cluster it loads it where EvalSHA will run.
	Load(ctx context.Context, script string) (sha string, err error)
	// EvalSHA runs the script sha with keys and args and returns its
	// reply, an array of integers. When the server answers NOSCRIPT, the
	// error must match ErrNoScript with errors.Is. A reply of another
	// shape is an error.
	EvalSHA(ctx context.Context, sha string, keys, args []string) ([]int64, error)
}

// Share keeps one retry.Budget or retry.Throttle in step with the other
// processes that share it, from a background goroutine. Get one with
// [Budget] or [Throttle]; stop it with Close. Its methods are safe for
// concurrent use.
type Share struct{ e *fleet.Engine }

// Stats counts what a Share did since it started.
type Stats struct {
	Syncs     int64 // syncs that succeeded
	Failures  int64 // syncs that failed or timed out
	Fallbacks int64 // switches from the fleet's counts to local ones
}

// Option configures [Budget] and [Throttle]. No option means all defaults.
type Option interface{ apply(*fleet.Config) }

type option func(*fleet.Config)

func (o option) apply(c *fleet.Config) { o(c) }

// WithSyncInterval sets the time between two syncs with the server. Default
// 100 ms (10 syncs per second per Share, the most allowed); shorter
// intervals are refused. Longer intervals mean less traffic, and slower
// leases: each sync hands the process its lease of the fleet's headroom
// (sized to the retries it asked for since the last sync), so a process
// whose lease is spent refuses retries until its next sync.
func WithSyncInterval(d time.Duration) Option {
	return option(func(c *fleet.Config) { c.Interval = d })
}

// WithSyncTimeout bounds one sync while the process decides with the
// fleet's counts: a sync that fails or takes longer makes it decide
// locally until a sync succeeds again. Default: the sync interval; it may
// not exceed it. While the process decides locally, a sync (typically a
// new connection) may take up to 1 s, as nothing waits on it.
func WithSyncTimeout(d time.Duration) Option {
	return option(func(c *fleet.Config) { c.Timeout = d })
}

// WithLogger sets where the switches to local decisions and back, and
// foreign data under the prefix, are logged (each once per occurrence).
// Default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return option(func(c *fleet.Config) { c.Logger = l })
}

// Budget starts sharing b with every process that calls Budget with the
// same prefix and the same Budget Window on the same server: the Budget
// then refuses retries once the whole fleet's retries reach Ratio × the
// whole fleet's first attempts + MinPerSecond × Window, so the floor is one
// floor for the fleet, not one per process. Each sync the server hands the
// process a lease, its share of what is left; it grants retries from that
// lease and from Ratio × its own first attempts since the sync.
//
// The keys are "{prefix}:budget:w<window ms>:<slot>", each with a TTL of 1.2
// windows plus one interval; on a cluster they share one hash slot. Until
// the first sync answers, b grants retries only from Ratio × its own first
// attempts (the floor is the fleet's, leased by the server); it decides
// locally whenever a sync fails, the first one too, and Close makes it
// local for good. What b counted before Budget is not pushed to the fleet,
// only what follows; sharing b again after Close continues where its last
// share stopped.
//
// It returns an error for a nil store or Budget, an empty prefix or one
// with a brace (it is the keys' Redis Cluster hash tag), or an invalid
// option; it does not contact the server (a server that is down at start
// is a fallback, logged, not an error).
func Budget(s Store, prefix string, b *retry.Budget, opts ...Option) (*Share, error) {
	cfg, err := config(s, prefix, opts)
	if err != nil {
		return nil, err
	}
	e, err := fleet.StartBudget(cfg, s, b)
	if err != nil {
		return nil, err
	}
	return &Share{e}, nil
}

// Throttle starts sharing t with every process that calls Throttle with the
// same prefix and Throttle Window on the same server: its rejection
// probability is then computed from the fleet's requests and accepts, so a
// process learns about an overload from the others' requests as well as its
// own. Keys and errors as for [Budget] ("{prefix}:throttle:w<window
// ms>:<slot>").
func Throttle(s Store, prefix string, t *retry.Throttle, opts ...Option) (*Share, error) {
	cfg, err := config(s, prefix, opts)
	if err != nil {
		return nil, err
	}
	e, err := fleet.StartThrottle(cfg, s, t)
	if err != nil {
		return nil, err
	}
	return &Share{e}, nil
}

func config(s Store, prefix string, opts []Option) (fleet.Config, error) {
	cfg := fleet.Config{Name: "retryshare", Prefix: prefix}
	if s == nil {
		return cfg, errors.New("retryshare: nil Store")
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	return cfg, nil
}

// Close stops the sync goroutine (interrupting a sync in progress) and
// leaves the Budget or Throttle local, without waiting for the server. A
// command of the sync that was in progress may still be waiting in the
// client (go-redis without ContextTimeoutEnabled waits its ReadTimeout;
// valkey-go may wait for the deadline it was given); it ends by itself, or
// when the client is closed. Close always returns nil; calling it again
// does nothing.
func (s *Share) Close() error {
	s.e.Close()
	return nil
}

// Shared reports whether the last sync succeeded, so that the Budget or
// Throttle decides with the fleet's counts now.
func (s *Share) Shared() bool { return s.e.Shared() }

// Stats returns what s did so far.
func (s *Share) Stats() Stats {
	a, b, c := s.e.Stats()
	return Stats{Syncs: a, Failures: b, Fallbacks: c}
}
