package retryredis

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/internal/rediscmd"
	"github.com/retrykit/retry/internal/redistest"
)

// TestCommandTableFromServer: the read-only flags come from the server's
// COMMAND reply; without a server the built-in table is used and a reload
// is pending.
func TestCommandTableFromServer(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	var tbl commandTable
	tbl.load(ctx, c.Process)
	m := tbl.readOnly.Load()
	if m == nil || tbl.needLoad.Load() {
		t.Fatal("COMMAND table not loaded")
	}
	if len(*m) < 200 || !(*m)["get"] || !(*m)["zrangebyscore"] || (*m)["incr"] || (*m)["set"] {
		t.Fatalf("table of %d commands: get %v zrangebyscore %v incr %v set %v", len(*m), (*m)["get"], (*m)["zrangebyscore"], (*m)["incr"], (*m)["set"])
	}
	// Every command the built-in table calls read-only is read-only for
	// this server too (when the server knows it).
	for name := range rediscmd.BuiltinReadOnly() {
		if ro, ok := (*m)[name]; ok && !ro {
			t.Errorf("built-in table says %s is read-only; the server says not", name)
		}
	}

	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	defer down.Close()
	var fallback commandTable
	fallback.load(ctx, down.Process)
	if fallback.readOnly.Load() != nil || !fallback.needLoad.Load() {
		t.Fatal("a failed COMMAND must leave the built-in table and a pending reload")
	}
	if !fallback.safe(ctx, redis.NewStringCmd(ctx, "get", "k")) || fallback.safe(ctx, redis.NewIntCmd(ctx, "incr", "k")) {
		t.Fatal("built-in table not used")
	}
}
