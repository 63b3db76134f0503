package retryredis_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/internal/redistest"
)

// TestWatchTxRefusedNotRepeated: EXEC answering EXECABORT discards the
// transaction and, with it, the connection's WATCH (Redis unwatches every
// key on EXEC, aborted or not). A MULTI/EXEC sent inside go-redis's Watch
// and refused at queue time (READONLY during a failover) must therefore
// not be repeated by the hook: the repeat runs without the optimistic
// lock, and applies a write that the WATCH was there to prevent (the key
// changed after WATCH: the transaction must never apply).
func TestWatchTxRefusedNotRepeated(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	if _, err := srv.Do("SET", "k", "0"); err != nil {
		t.Fatal(err)
	}
	c := failoverClient(t, srv)

	err := c.Watch(ctx, func(tx *redis.Tx) error {
		if _, err := tx.Get(ctx, "k").Result(); err != nil {
			return err
		}
		// Another process changes k after the WATCH: EXEC must not apply.
		if _, err := srv.Do("SET", "k", "other"); err != nil {
			return err
		}
		// A failover starts: the next writes are refused with READONLY.
		if _, err := srv.Do("REPLICAOF", "127.0.0.1", "1"); err != nil {
			return err
		}
		_, err := tx.TxPipelined(ctx, func(pl redis.Pipeliner) error {
			pl.Set(ctx, "k", "mine", 0)
			return nil
		})
		return err
	}, "k")
	srv.Do("REPLICAOF", "NO", "ONE")
	v, gerr := srv.Do("GET", "k")
	if gerr != nil {
		t.Fatal(gerr)
	}
	if v != "other" {
		t.Fatalf("k = %q after a WATCHed transaction refused (EXECABORT) and repeated (err %v); want %q: the repeat ran without the WATCH and overwrote a change the WATCH guarded", v, err, "other")
	}
	if !redis.HasErrorPrefix(err, "EXECABORT") {
		t.Fatalf("Watch: %v; want EXECABORT as go-redis returns it", err)
	}
}
