package fleettest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/internal/fleetseam"
	"github.com/retrykit/retry/internal/redistest"
)

// The single-process share tests of retryredis and retryvalkey: each
// module's TestShare* calls one of these with a Dialer for its client.

// Dialer returns a module's client for the share tests, closed when t
// ends.
type Dialer func(t *testing.T, addr string) Client

// SyncBuffer is a log destination safe for the sync goroutines.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WaitFor polls cond every 10 ms for up to d.
func WaitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// Grant takes up to max retries from b and returns how many it got.
func Grant(b *retry.Budget, max int) int {
	n := 0
	for n < max && account.AllowRetry(b) {
		n++
	}
	return n
}

func stats(s Share) string {
	a, b, c := s.Counts()
	return fmt.Sprintf("{Syncs:%d Failures:%d Fallbacks:%d}", a, b, c)
}

// ShareBudgetTwoProcesses: two Budgets with their own clients share one
// reserve: what one grants, the other cannot.
func ShareBudgetTwoProcesses(t *testing.T, dial Dialer) { shareReserve(t, dial, "t2p", Grant) }

// ShareBudgetBoundsHedges: hedges draw on a shared Budget as retries do.
// What hedged calls through one process spend of the shared reserve,
// hedged calls through the other cannot.
func ShareBudgetBoundsHedges(t *testing.T, dial Dialer) {
	shareReserve(t, dial, "hedges", func(b *retry.Budget, max int) int { return hedgeGrant(t, b, max) })
}

// hedgeGrant makes up to max hedged calls through a Policy with Budget b,
// each of which asks b for one hedge (its first copy takes 20 ms, the
// hedge is due after 1 ms and answers at once), and returns how many
// hedges were sent: the ones b granted.
func hedgeGrant(t *testing.T, b *retry.Budget, max int) int {
	t.Helper()
	h, err := retry.NewHedger(retry.HedgeConfig{FixedDelay: time.Millisecond, MaxCopies: 2})
	if err != nil {
		t.Fatal(err)
	}
	p := retry.Policy{Budget: b, MaxAttempts: 2}
	hedges := 0
	for range max {
		err := retry.Hedge(context.Background(), p, h, func(ctx context.Context) error {
			if retry.HedgeAttempt(ctx) > 1 {
				hedges++ // one hedge per call, and only its copy runs this
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
				return nil
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return hedges
}

// shareReserve: two Budgets with their own clients, sharing under prefix
// a reserve of 10, spend it through grant: 6 through the first, then at
// most the 4 left through the second.
func shareReserve(t *testing.T, dial Dialer, prefix string, grant func(b *retry.Budget, max int) int) {
	srv := redistest.Start(t)
	cfg := retry.BudgetConfig{Ratio: -1, MinPerSecond: 1, Window: 10 * time.Second} // reserve 10
	b1, _ := retry.NewBudget(cfg)
	b2, _ := retry.NewBudget(cfg)
	s1, err := dial(t, srv.Addr()).ShareBudget(prefix, b1, ShareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := dial(t, srv.Addr()).ShareBudget(prefix, b2, ShareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if !WaitFor(time.Second, func() bool { return s1.Shared() && s2.Shared() }) {
		t.Fatal("shares did not join")
	}
	// b1 grants from its lease, sized to what it asked for since its last
	// sync: spend 6 of the shared 10 over a few syncs.
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
		if !strings.HasPrefix(k, "{"+prefix+"}:budget:w10000:") {
			t.Fatalf("unexpected key %q", k)
		}
	}
}

// ShareScriptFlushed: after SCRIPT FLUSH the engine loads the script
// again (NOSCRIPT) and keeps syncing, without a fallback.
func ShareScriptFlushed(t *testing.T, dial Dialer) {
	srv := redistest.Start(t)
	b, _ := retry.NewBudget(retry.BudgetConfig{})
	s, err := dial(t, srv.Addr()).ShareBudget("flush", b, ShareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !WaitFor(time.Second, s.Shared) {
		t.Fatal("did not join")
	}
	if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	before, _, _ := s.Counts()
	if !WaitFor(time.Second, func() bool { n, _, _ := s.Counts(); return n >= before+3 }) {
		t.Fatal("no syncs after SCRIPT FLUSH")
	}
	if _, failures, fallbacks := s.Counts(); failures != 0 || fallbacks != 0 {
		t.Fatalf("stats after SCRIPT FLUSH: %s", stats(s))
	}
	loads, _ := srv.CommandCalls("script|load")
	if loads < 2 {
		t.Fatalf("SCRIPT LOAD called %d times, want 2 (once, again after NOSCRIPT)", loads)
	}
}

// ShareForeignData: keys of another type and fields that are not
// numbers under the prefix are logged once and ignored.
func ShareForeignData(t *testing.T, dial Dialer) {
	srv := redistest.Start(t)
	var logs SyncBuffer
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
	// And a lease key of another type: no lease, never overwritten.
	srv.Do("SET", "{bad}:budget:w2000:lease", "mine")
	s, err := dial(t, srv.Addr()).ShareBudget("bad", b, ShareOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !WaitFor(2*time.Second, func() bool { n, _, _ := s.Counts(); return n >= 10 }) {
		t.Fatalf("syncs stalled with foreign data: %s", stats(s))
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
	if v, _ := srv.Do("GET", "{bad}:budget:w2000:lease"); v != "mine" {
		t.Fatalf("foreign lease key overwritten: %q", v)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// ShareFallbackAndRejoin: with the server killed, the share falls back
// within one sync after it, the Budget decides locally (full local
// reserve) and the switch is logged once; restarted empty, it rejoins
// within two sync intervals.
func ShareFallbackAndRejoin(t *testing.T, dial Dialer) {
	srv := redistest.Start(t)
	var logs SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	b, _ := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: 1, Window: 10 * time.Second})
	s, err := dial(t, srv.Addr()).ShareBudget("fb", b, ShareOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !WaitFor(time.Second, s.Shared) {
		t.Fatal("did not join")
	}
	// Another process spent the whole fleet reserve.
	other, _ := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: 1, Window: 10 * time.Second})
	so, _ := dial(t, srv.Addr()).ShareBudget("fb", other, ShareOptions{})
	WaitFor(time.Second, so.Shared)
	spent := 0
	for end := time.Now().Add(5 * time.Second); spent < 10 && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		spent += Grant(other, 100)
	}
	if spent != 10 {
		t.Fatalf("the other process granted %d of the fleet reserve 10", spent)
	}
	time.Sleep(250 * time.Millisecond) // two syncs: pushed, and read by b
	so.Close()
	if n := Grant(b, 100); n != 0 {
		t.Fatalf("granted %d with the fleet reserve spent", n)
	}
	srv.Stop()
	stopped := time.Now()
	if !WaitFor(time.Second, func() bool { return !s.Shared() }) {
		t.Fatal("no fallback within 1 s of the server's death")
	}
	if d := time.Since(stopped); d > 250*time.Millisecond {
		t.Errorf("fell back %v after the server died, want within interval + timeout (200 ms)", d)
	}
	if n := Grant(b, 100); n != 10 {
		t.Fatalf("local fallback granted %d, want the local reserve 10", n)
	}
	time.Sleep(300 * time.Millisecond) // several failing syncs: logged once
	if n := strings.Count(logs.String(), "unavailable"); n != 1 {
		t.Fatalf("fallback logged %d times, want once:\n%s", n, logs.String())
	}
	srv.Restart() // empty: no keys, no script
	restarted := time.Now()
	if !WaitFor(time.Second, s.Shared) {
		t.Fatalf("did not rejoin within 1 s of the restart: %s", stats(s))
	}
	if d := time.Since(restarted); d > 2*100*time.Millisecond+50*time.Millisecond {
		t.Errorf("rejoined %v after the restart, want within two sync intervals", d)
	}
	if !strings.Contains(logs.String(), "is back") {
		t.Fatalf("rejoin not logged:\n%s", logs.String())
	}
}

// ShareErrors: a bad argument or option is an error with the module's
// prefix ("retryshare: "). c is any client; nilClient shares with a nil
// client of the module.
func ShareErrors(t *testing.T, module string, c Client, nilClient func(*retry.Budget) error) {
	b, _ := retry.NewBudget(retry.BudgetConfig{})
	for name, f := range map[string]func() error{
		"nil client":   func() error { return nilClient(b) },
		"nil budget":   func() error { _, err := c.ShareBudget("p", nil, ShareOptions{}); return err },
		"nil throttle": func() error { _, err := c.ShareThrottle("p", nil, ShareOptions{}); return err },
		"empty prefix": func() error { _, err := c.ShareBudget("", b, ShareOptions{}); return err },
		"short interval": func() error {
			_, err := c.ShareBudget("p", b, ShareOptions{SyncInterval: 50 * time.Millisecond})
			return err
		},
		"long timeout": func() error {
			_, err := c.ShareBudget("p", b, ShareOptions{SyncTimeout: time.Second})
			return err
		},
	} {
		err := f()
		if err == nil || !strings.HasPrefix(err.Error(), module+": ") {
			t.Errorf("%s: err = %v, want a %s: error", name, err, module)
		}
	}
}

// ShareThroughRetryClient: a Budget and a Throttle shared over a client
// whose retry layer is retrykit's, with a policy holding that Budget and
// Throttle (dial makes such a client). The syncs bypass the client's retry
// loop: they are not first attempts of the Budget nor requests of the
// Throttle, which would otherwise earn the process about a floor's worth
// of retries a second, the multiplication sharing is meant to prevent.
func ShareThroughRetryClient(t *testing.T, dial func(t *testing.T, addr string, p retry.Policy) Client) {
	srv := redistest.Start(t)
	b, _ := retry.NewBudget(retry.BudgetConfig{})
	th, _ := retry.NewThrottle(retry.ThrottleConfig{})
	c := dial(t, srv.Addr(), retry.Policy{Budget: b, Throttle: th})
	sb, err := c.ShareBudget("bypass", b, ShareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	st, err := c.ShareThrottle("bypass", th, ShareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !WaitFor(2*time.Second, func() bool {
		nb, _, _ := sb.Counts()
		nt, _, _ := st.Counts()
		return nb >= 3 && nt >= 3
	}) {
		t.Fatalf("no syncs: budget %s, throttle %s", stats(sb), stats(st))
	}
	if first, retries := fleetseam.BudgetOf[*retry.Budget]().LocalCounts(b); first != 0 || retries != 0 {
		t.Errorf("the Budget counted %d first attempts and %d retries from its own syncs, want none", first, retries)
	}
	if requests, accepts := fleetseam.ThrottleOf[*retry.Throttle]().LocalCounts(th); requests != 0 || accepts != 0 {
		t.Errorf("the Throttle counted %d requests (%d accepted) from its own syncs, want none", requests, accepts)
	}
}

// ShareSlowServer: a server that stops answering (CLIENT PAUSE: it takes
// commands and replies only when the pause ends) while a share syncs
// through dial's client, which should be configured as docs/storms.md says
// (go-redis: MaxRetries -1, DialerRetries 1, its 3 s ReadTimeout and no
// ContextTimeoutEnabled; valkey-go: its defaults). The README said: "A
// sync that fails or takes longer than its timeout (the interval by
// default) makes the process decide locally at once", whether or not the client
// honours the context; and Close ("interrupting a sync in progress") does
// not wait for the server.
func ShareSlowServer(t *testing.T, dial Dialer) {
	srv := redistest.Start(t)
	b, _ := retry.NewBudget(retry.BudgetConfig{})
	quiet := slog.New(slog.DiscardHandler)
	s, err := dial(t, srv.Addr()).ShareBudget("slow", b, ShareOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	if !WaitFor(2*time.Second, s.Shared) {
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
	start := time.Now()
	s.Close()
	closed = true
	if d := time.Since(start); d > 300*time.Millisecond {
		t.Errorf("Close took %v with a sync in progress, want it interrupted", d.Round(time.Millisecond))
	}
	// The client is closed, then the server killed, still paused, when
	// the test ends; the sync command left waiting ends with them.
}
