package retryredis

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry/retryshare"
)

// ShareStore adapts client to a retryshare.Store, through which
// retryshare.Budget and retryshare.Throttle share a Budget or Throttle
// across a fleet. client is any go-redis client (*redis.Client,
// *redis.ClusterClient, *redis.Ring, a failover client) as the caller
// configured it, also one with the hook of [NewHook]: the syncs bypass that
// hook (they are not retried, the next sync is the retry, and count neither
// in the policy's Budget nor in its Throttle). A nil client gives a nil
// Store, which retryshare refuses.
func ShareStore(client redis.Scripter) retryshare.Store {
	if client == nil {
		return nil
	}
	return newStore(client)
}

// store adapts a go-redis client to retryshare.Store.
type store struct{ c redis.Scripter }

// newStore returns the store of client, whose syncs bypass the hook of
// AddHook if the client has it, now or later (see bypass).
func newStore(client redis.Scripter) retryshare.Store {
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
		return nil, fmt.Errorf("%w: %w", retryshare.ErrNoScript, err)
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
		return nil, fmt.Errorf("%w: %w", retryshare.ErrNoScript, err)
	}
	return v, err
}
