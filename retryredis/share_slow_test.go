package retryredis_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retryredis"
)

// A server that stops answering (CLIENT PAUSE: it accepts commands and
// replies only later) while a Share syncs through a client configured as
// the README recommends (MaxRetries -1, DialerRetries 1, go-redis's other
// defaults). The README: "A sync that fails or takes longer than its
// timeout (the interval by default) makes the process decide locally at
// once". go-redis ignores the context's deadline unless
// ContextTimeoutEnabled is set and waits ReadTimeout (3 s) instead, so
// the Budget kept deciding with the fleet's stale counts for the whole
// pause, and Close ("interrupting a sync in progress") waited for it.
func TestSlowServerFallsBackWithinTimeout(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	b, _ := retry.NewBudget(retry.BudgetConfig{})
	s, err := retryredis.ShareBudget(rdb, "slow", b, retryredis.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	deadline := time.Now().Add(2 * time.Second)
	for !s.Shared() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !s.Shared() {
		t.Fatal("did not join")
	}
	if _, err := srv.Do("CLIENT", "PAUSE", "1200", "ALL"); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	for s.Shared() && time.Since(paused) < 700*time.Millisecond {
		time.Sleep(5 * time.Millisecond)
	}
	if d := time.Since(paused); s.Shared() || d > 700*time.Millisecond {
		t.Errorf("server paused: still deciding with the fleet's counts after %v (fell back: %v), want a fallback within interval + timeout (200 ms; 700 ms with slack)", d.Round(time.Millisecond), !s.Shared())
	}
	// Close interrupts a sync in progress (the server is still paused).
	start := time.Now()
	s.Close()
	closed = true
	if d := time.Since(start); d > 300*time.Millisecond {
		t.Errorf("Close took %v with a sync in progress, want it interrupted", d.Round(time.Millisecond))
	}
	// The server is killed, still paused, when the test ends.
}
