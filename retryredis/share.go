package retryredis

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry/retryshare"
)

// ShareStore returns the [retryshare.Store] of client: any go-redis client
// (*redis.Client, *redis.ClusterClient, *redis.Ring, a failover client),
// also one with the hook of [NewHook], now or later, which the syncs
// bypass (see bypass).
func ShareStore(client redis.Scripter) retryshare.Store {
	switch c := client.(type) {
	case nil:
		return nil
	case *redis.Client:
		sharing.Store(true)
	case *redis.Ring:
		return &ringStore{r: c}
	}
	return store{client}
}

// store adapts a go-redis client to retryshare.Store.
type store struct{ c redis.Scripter }

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
