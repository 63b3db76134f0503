package retryredis

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/fleet"
)

// Share keeps one retry.Budget or retry.Throttle in step with the other
// processes that share it through Redis, from a background goroutine. Get
// one with [ShareBudget] or [ShareThrottle]; stop it with Close. Its
// methods are safe for concurrent use.
type Share struct{ e *fleet.Engine }

// ShareStats counts what a Share did since it started.
type ShareStats struct {
	Syncs     int64 // syncs that succeeded
	Failures  int64 // syncs that failed or timed out
	Fallbacks int64 // switches from the fleet's counts to local ones
}

// ShareOption configures [ShareBudget] and [ShareThrottle]. No option
// means all defaults.
type ShareOption interface{ applyShare(*fleet.Config) }

type shareOption func(*fleet.Config)

func (o shareOption) applyShare(c *fleet.Config) { o(c) }

// WithSyncInterval sets the time between two syncs with Redis. Default
// 100 ms (10 syncs per second per Share, the most allowed); shorter
// intervals are refused. Longer intervals mean less traffic, and slower
// leases: each sync hands the process its lease of the fleet's headroom
// (sized to the retries it asked for since the last sync), so a process
// whose lease is spent refuses retries until its next sync.
func WithSyncInterval(d time.Duration) ShareOption {
	return shareOption(func(c *fleet.Config) { c.Interval = d })
}

// WithSyncTimeout bounds one sync while the process decides with the
// fleet's counts: a sync that fails or takes longer makes it decide
// locally until a sync succeeds again. Default: the sync interval; it may
// not exceed it. While the process decides locally, a sync (typically a
// new connection) may take up to 1 s, as nothing waits on it.
func WithSyncTimeout(d time.Duration) ShareOption {
	return shareOption(func(c *fleet.Config) { c.Timeout = d })
}

// WithLogger sets where the switches to local decisions and back, and
// foreign data under the prefix, are logged (each once per occurrence).
// Default slog.Default().
func WithLogger(l *slog.Logger) ShareOption {
	return shareOption(func(c *fleet.Config) { c.Logger = l })
}

// ShareBudget starts sharing b with every process that calls ShareBudget
// with the same prefix and the same Budget Window on the same server: the
// Budget then refuses retries once the whole fleet's retries reach Ratio
// × the whole fleet's first attempts + MinPerSecond × Window, so the floor
// is one floor for the fleet, not one per process. Each sync the server
// hands the process a lease, its share of what is left (see the README's
// "Sharing a budget across a fleet"); it grants retries from that lease
// and from Ratio × its own first attempts since the sync.
//
// client is any go-redis client (*redis.Client, *redis.ClusterClient,
// *redis.Ring, a failover client) as the caller configured it, also one
// that Instrument made retrykit's: the syncs bypass its hook (they are
// not retried, the next sync is the retry, and count neither in the
// policy's Budget nor in its Throttle). The keys are
// "{prefix}:budget:w<window ms>:<slot>", each with a TTL of 1.2 windows
// plus one interval; on a cluster they share one hash slot. Nothing is sent
// on the request path. Until the first sync answers, b grants retries
// only from Ratio × its own first attempts (the floor is the fleet's,
// leased by the server); it decides locally whenever a sync fails, the
// first one too, and Close makes it local for good. What b
// counted before ShareBudget is not pushed to the fleet, only what
// follows; sharing b again after Close continues where its last share
// stopped.
//
// It returns an error for a nil client or Budget, an empty prefix or one
// with a brace (it is the keys' Redis Cluster hash tag), or an invalid
// option; it does not contact the server (a server that is down
// at start is a fallback, logged, not an error).
func ShareBudget(client redis.Scripter, prefix string, b *retry.Budget, opts ...ShareOption) (*Share, error) {
	cfg, err := shareConfig(client, prefix, opts)
	if err != nil {
		return nil, err
	}
	e, err := fleet.StartBudget(cfg, newStore(client), b)
	if err != nil {
		return nil, err
	}
	return &Share{e}, nil
}

// ShareThrottle starts sharing t with every process that calls
// ShareThrottle with the same prefix and Throttle Window on the same
// server: its rejection probability is then computed from the fleet's
// requests and accepts, so a process learns about an overload from the
// others' requests as well as its own. Keys, client and errors as for
// [ShareBudget] ("{prefix}:throttle:w<window ms>:<slot>").
func ShareThrottle(client redis.Scripter, prefix string, t *retry.Throttle, opts ...ShareOption) (*Share, error) {
	cfg, err := shareConfig(client, prefix, opts)
	if err != nil {
		return nil, err
	}
	e, err := fleet.StartThrottle(cfg, newStore(client), t)
	if err != nil {
		return nil, err
	}
	return &Share{e}, nil
}

func shareConfig(client redis.Scripter, prefix string, opts []ShareOption) (fleet.Config, error) {
	cfg := fleet.Config{Name: "retryredis", Prefix: prefix}
	if client == nil {
		return cfg, errors.New("retryredis: nil client")
	}
	for _, o := range opts {
		if o != nil {
			o.applyShare(&cfg)
		}
	}
	return cfg, nil
}

// Close stops the sync goroutine (interrupting a sync in progress) and
// leaves the Budget or Throttle local, without waiting for the server. A
// command of the sync that was in progress may still be waiting in the
// client (go-redis without ContextTimeoutEnabled waits its ReadTimeout); it ends
// by itself, or when the client is closed. Close always returns nil;
// calling it again does nothing.
func (s *Share) Close() error {
	s.e.Close()
	return nil
}

// Shared reports whether the last sync succeeded, so that the Budget or
// Throttle decides with the fleet's counts now.
func (s *Share) Shared() bool { return s.e.Shared() }

// Stats returns what s did so far.
func (s *Share) Stats() ShareStats {
	a, b, c := s.e.Stats()
	return ShareStats{Syncs: a, Failures: b, Fallbacks: c}
}

// store adapts a go-redis client to fleet.Store.
type store struct{ c redis.Scripter }

// newStore returns the store of client, whose syncs bypass the hook of
// Instrument if the client has it, now or later (see bypass).
func newStore(client redis.Scripter) fleet.Store {
	if _, ok := client.(*redis.Client); ok {
		sharing.Store(true)
	}
	if r, ok := client.(*redis.Ring); ok {
		return &ringStore{r: r}
	}
	return store{client}
}

func (s store) Load(ctx context.Context, script string) (string, error) {
	ctx = context.WithValue(ctx, shareKey{}, true)
	return s.c.ScriptLoad(ctx, script).Result()
}

func (s store) EvalSHA(ctx context.Context, sha string, keys, args []string) ([]int64, error) {
	ctx = context.WithValue(ctx, shareKey{}, true)
	argv := make([]any, len(args))
	for i, a := range args {
		argv[i] = a
	}
	v, err := s.c.EvalSha(ctx, sha, keys, argv...).Int64Slice()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		return nil, fmt.Errorf("%w: %w", fleet.ErrNoScript, err)
	}
	return v, err
}

// ringStore adapts a *redis.Ring. A Ring sends a command without a key,
// such as SCRIPT LOAD, to a random shard, while EVALSHA goes to the shard
// of its first key: the script is loaded on that shard instead, and
// loaded again there within the same call when the shard answers
// NOSCRIPT (a shard restarted, or the keys moved to another shard).
type ringStore struct {
	r      *redis.Ring
	script string // set by Load; used by the one sync goroutine
}

// Load computes the script's SHA-1; the script is loaded on the keys'
// shard by the first EvalSHA.
func (s *ringStore) Load(_ context.Context, script string) (string, error) {
	s.script = script
	sum := sha1.Sum([]byte(script))
	return hex.EncodeToString(sum[:]), nil
}

func (s *ringStore) EvalSHA(ctx context.Context, sha string, keys, args []string) ([]int64, error) {
	ctx = context.WithValue(ctx, shareKey{}, true)
	argv := make([]any, len(args))
	for i, a := range args {
		argv[i] = a
	}
	v, err := s.r.EvalSha(ctx, sha, keys, argv...).Int64Slice()
	if err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") || s.script == "" {
		return v, err
	}
	shard, err := s.r.GetShardClientForKey(keys[0])
	if err != nil {
		return nil, err
	}
	if err := shard.ScriptLoad(ctx, s.script).Err(); err != nil {
		return nil, err
	}
	v, err = s.r.EvalSha(ctx, sha, keys, argv...).Int64Slice()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		return nil, fmt.Errorf("%w: %w", fleet.ErrNoScript, err)
	}
	return v, err
}
