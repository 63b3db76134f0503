package retryredis_test

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/fleettest"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retryredis"
	"go.uber.org/goleak"
)

// syncBuffer is a log destination safe for the sync goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func shareClient(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { c.Close() })
	return c
}

// waitFor polls cond every 10 ms for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func grant(b *retry.Budget, max int) int {
	n := 0
	for n < max && b.AllowRetry() {
		n++
	}
	return n
}

// TestShareBudgetTwoProcesses: two Budgets with their own clients share one
// reserve: what one grants, the other cannot.
func TestShareBudgetTwoProcesses(t *testing.T) {
	srv := redistest.Start(t)
	cfg := retry.BudgetConfig{Ratio: -1, MinPerSecond: 1, Window: 10 * time.Second} // reserve 10
	b1, _ := retry.NewBudget(cfg)
	b2, _ := retry.NewBudget(cfg)
	s1, err := retryredis.ShareBudget(shareClient(t, srv.Addr()), "t2p", b1)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := retryredis.ShareBudget(shareClient(t, srv.Addr()), "t2p", b2)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if !waitFor(time.Second, func() bool { return s1.Shared() && s2.Shared() }) {
		t.Fatal("shares did not join")
	}
	// b1 may grant its allowance, max(1, 1 × 0.1 s) = 1, per two syncs:
	// spend 6 of the shared 10 over a few syncs.
	got1 := 0
	for end := time.Now().Add(3 * time.Second); got1 < 6 && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		got1 += grant(b1, 6-got1)
	}
	if got1 != 6 {
		t.Fatalf("b1 granted %d, want 6", got1)
	}
	// Two sync intervals later b2 knows: at most 4 are left for it.
	time.Sleep(250 * time.Millisecond)
	got2 := 0
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		got2 += grant(b2, 100)
	}
	if got2 > 4 {
		t.Fatalf("b2 granted %d after b1 took 6 of the shared reserve of 10, want ≤ 4", got2)
	}
	if got2 == 0 {
		t.Fatal("b2 granted nothing of the 4 left")
	}
	// Every key has a TTL.
	keys, err := srv.Do("KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range strings.Fields(keys) {
		ttl, err := srv.Do("PTTL", k)
		if err != nil || ttl == "-1" {
			t.Fatalf("key %q has no TTL (%s, %v)", k, ttl, err)
		}
		if !strings.HasPrefix(k, "{t2p}:budget:w10000:") {
			t.Fatalf("unexpected key %q", k)
		}
	}
}

// TestShareScriptFlushed: after SCRIPT FLUSH the engine loads the script
// again (NOSCRIPT) and keeps syncing, without a fallback.
func TestShareScriptFlushed(t *testing.T) {
	srv := redistest.Start(t)
	b, _ := retry.NewBudget(retry.BudgetConfig{})
	s, err := retryredis.ShareBudget(shareClient(t, srv.Addr()), "flush", b)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !waitFor(time.Second, s.Shared) {
		t.Fatal("did not join")
	}
	if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	before := s.Stats().Syncs
	if !waitFor(time.Second, func() bool { return s.Stats().Syncs >= before+3 }) {
		t.Fatal("no syncs after SCRIPT FLUSH")
	}
	if st := s.Stats(); st.Failures != 0 || st.Fallbacks != 0 {
		t.Fatalf("stats after SCRIPT FLUSH: %+v", st)
	}
	loads, _ := srv.CommandCalls("script|load")
	if loads < 2 {
		t.Fatalf("SCRIPT LOAD called %d times, want 2 (once, again after NOSCRIPT)", loads)
	}
}

// TestShareForeignData: keys of another type and fields that are not
// numbers under the prefix are logged once and ignored.
func TestShareForeignData(t *testing.T) {
	srv := redistest.Start(t)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	b, _ := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: 5, Window: 2 * time.Second})
	// Plant foreign data in every slot of the next few seconds.
	k := time.Now().UnixNano() / int64(200*time.Millisecond)
	for i := int64(-10); i < 30; i++ {
		key := "{bad}:budget:w2000:" + itoa(k+i)
		switch i % 3 {
		case 0:
			srv.Do("SET", key, "hello")
		case 1:
			srv.Do("HSET", key, "a", "x", "b", "-3")
		default:
			srv.Do("HSET", key, "a", "1e400", "b", "2.5")
		}
	}
	s, err := retryredis.ShareBudget(shareClient(t, srv.Addr()), "bad", b, retryredis.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !waitFor(2*time.Second, func() bool { return s.Stats().Syncs >= 10 }) {
		t.Fatalf("syncs stalled with foreign data: %+v", s.Stats())
	}
	if !s.Shared() {
		t.Fatal("foreign data made the share fall back")
	}
	if n := strings.Count(logs.String(), "did not write"); n != 1 {
		t.Fatalf("bad data logged %d times, want once:\n%s", n, logs.String())
	}
	// The foreign string keys were not overwritten.
	if v, _ := srv.Do("GET", "{bad}:budget:w2000:"+itoa(k)); v != "hello" {
		t.Fatalf("foreign key overwritten: %q", v)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestShareFallbackAndRejoin: with the server killed, the share falls back
// within one sync after it, the Budget decides locally (full local
// reserve) and the switch is logged once; restarted empty, it rejoins
// within two sync intervals.
func TestShareFallbackAndRejoin(t *testing.T) {
	srv := redistest.Start(t)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	b, _ := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: 1, Window: 10 * time.Second})
	c := shareClient(t, srv.Addr())
	s, err := retryredis.ShareBudget(c, "fb", b, retryredis.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !waitFor(time.Second, s.Shared) {
		t.Fatal("did not join")
	}
	// Another process spent the whole fleet reserve.
	other, _ := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: 1, Window: 10 * time.Second})
	so, _ := retryredis.ShareBudget(shareClient(t, srv.Addr()), "fb", other)
	waitFor(time.Second, so.Shared)
	spent := 0
	for end := time.Now().Add(5 * time.Second); spent < 10 && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		spent += grant(other, 100)
	}
	if spent != 10 {
		t.Fatalf("the other process granted %d of the fleet reserve 10", spent)
	}
	time.Sleep(250 * time.Millisecond) // two syncs: pushed, and read by b
	so.Close()
	if n := grant(b, 100); n != 0 {
		t.Fatalf("granted %d with the fleet reserve spent", n)
	}
	srv.Stop()
	stopped := time.Now()
	if !waitFor(time.Second, func() bool { return !s.Shared() }) {
		t.Fatal("no fallback within 1 s of the server's death")
	}
	if d := time.Since(stopped); d > 250*time.Millisecond {
		t.Errorf("fell back %v after the server died, want within interval + timeout (200 ms)", d)
	}
	if n := grant(b, 100); n != 10 {
		t.Fatalf("local fallback granted %d, want the local reserve 10", n)
	}
	time.Sleep(300 * time.Millisecond) // several failing syncs: logged once
	if n := strings.Count(logs.String(), "unavailable"); n != 1 {
		t.Fatalf("fallback logged %d times, want once:\n%s", n, logs.String())
	}
	srv.Restart() // empty: no keys, no script
	restarted := time.Now()
	if !waitFor(time.Second, s.Shared) {
		t.Fatalf("did not rejoin within 1 s of the restart: %+v", s.Stats())
	}
	if d := time.Since(restarted); d > 2*100*time.Millisecond+50*time.Millisecond {
		t.Errorf("rejoined %v after the restart, want within two sync intervals", d)
	}
	if !strings.Contains(logs.String(), "is back") {
		t.Fatalf("rejoin not logged:\n%s", logs.String())
	}
}

func TestShareErrors(t *testing.T) {
	b, _ := retry.NewBudget(retry.BudgetConfig{})
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for name, f := range map[string]func() error{
		"nil client":   func() error { _, err := retryredis.ShareBudget(nil, "p", b); return err },
		"nil budget":   func() error { _, err := retryredis.ShareBudget(c, "p", nil); return err },
		"nil throttle": func() error { _, err := retryredis.ShareThrottle(c, "p", nil); return err },
		"empty prefix": func() error { _, err := retryredis.ShareBudget(c, "", b); return err },
		"short interval": func() error {
			_, err := retryredis.ShareBudget(c, "p", b, retryredis.WithSyncInterval(50*time.Millisecond))
			return err
		},
		"long timeout": func() error {
			_, err := retryredis.ShareBudget(c, "p", b, retryredis.WithSyncTimeout(time.Second))
			return err
		},
	} {
		err := f()
		if err == nil || !strings.HasPrefix(err.Error(), "retryredis: ") {
			t.Errorf("%s: err = %v, want a retryredis: error", name, err)
		}
	}
}

func TestMain(m *testing.M) {
	if fleettest.WorkerMain(fleetAdapter) {
		return
	}
	goleak.VerifyTestMain(m)
}
