package fleet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/internal/redistest"
)

// The engine tests run in synctest bubbles, against a real redis-server
// started outside the bubble: the engine's ticker, sync timeouts and clock
// and the Budget's and Throttle's clocks are the bubble's, which advances
// only while every goroutine in it waits. A sync's round trip to the
// server takes no bubble time, so every sync runs on its tick and the
// tests end in milliseconds. The server's key TTLs run on real time; they
// outlast a test, and the engine names slots by bubble time.

// srvStore is a Store over redistest's one-connection-per-command client.
type srvStore struct {
	srv *redistest.Server
	// lose, when it returns true, makes EvalSHA report an error after the
	// server ran the script: a reply lost (connection reset, timeout).
	lose func() bool
	// down, when set and true, makes every call fail unsent.
	down *atomic.Bool
	// skip, when it returns true, makes EvalSHA fail unsent: the next
	// sync comes two intervals after the last success.
	skip func() bool
}

var errDown = errors.New("dial tcp: connection refused")

func (s srvStore) Load(_ context.Context, script string) (string, error) {
	if s.down != nil && s.down.Load() {
		return "", errDown
	}
	return s.srv.Do("SCRIPT", "LOAD", script)
}

func (s srvStore) EvalSHA(_ context.Context, sha string, keys, args []string) ([]int64, error) {
	if s.down != nil && s.down.Load() {
		return nil, errDown
	}
	if s.skip != nil && s.skip() {
		return nil, errDown
	}
	cmd := append([]string{"EVALSHA", sha, strconv.Itoa(len(keys))}, keys...)
	cmd = append(cmd, args...)
	r, err := s.srv.Do(cmd...)
	if err != nil {
		if strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return nil, errors.Join(ErrNoScript, err)
		}
		return nil, err
	}
	if s.lose != nil && s.lose() {
		return nil, errors.New("read: connection reset by peer")
	}
	var out []int64
	for _, f := range strings.Split(r, "\n") {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// fieldSum adds up field f of every slot key of kind under {prefix}.
func fieldSum(t *testing.T, srv *redistest.Server, prefix, kind, f string) int64 {
	t.Helper()
	keys, err := srv.Do("KEYS", "{"+prefix+"}:"+kind+":*")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, k := range strings.Fields(keys) {
		if strings.Contains(k, ":p:") {
			continue // a process's mark key
		}
		v, err := srv.Do("HGET", k, f)
		if err != nil || v == "" {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		sum += n
	}
	return sum
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// A sync interval at least as long as a window slot is valid, yet every
// sync then found its last success "more than a slot" ago and dropped the
// first attempts (a Budget) or everything (a Throttle): the fleet never
// saw them.
func TestIntervalLongerThanSlotPushesCounts(t *testing.T) {
	srv := redistest.Start(t)
	synctest.Test(t, func(t *testing.T) {
		b, _ := retry.NewBudget(retry.BudgetConfig{Ratio: 1, MinPerSecond: -1, Window: time.Second}) // slot 100 ms
		th, _ := retry.NewThrottle(retry.ThrottleConfig{Window: time.Second})
		cfg := Config{Name: "x", Prefix: "slow", Interval: 200 * time.Millisecond, Logger: quiet}
		// Every third sync fails unsent, so the one after it comes two
		// intervals after the last success: late, but within the slack
		// of a regular sync (one interval plus max(slot, interval)).
		every3 := func() func() bool {
			var n atomic.Int64
			return func() bool { return n.Add(1)%3 == 0 }
		}
		eb, err := StartBudget(cfg, srvStore{srv: srv, skip: every3()}, b)
		if err != nil {
			t.Fatal(err)
		}
		defer eb.Close()
		et, err := StartThrottle(cfg, srvStore{srv: srv, skip: every3()}, th)
		if err != nil {
			t.Fatal(err)
		}
		defer et.Close()
		var sent int64
		for end := time.Now().Add(900 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			account.RecordAttempt(b)
			account.Record(th, true)
			sent++
		}
		time.Sleep(650 * time.Millisecond) // three more syncs, one of them failing
		// In the bubble every sync runs on its tick: every event must be in
		// the store.
		if a := fieldSum(t, srv, "slow", "budget", "a"); a != sent {
			t.Errorf("budget: %d first attempts made, the store holds %d", sent, a)
		}
		if a, b := fieldSum(t, srv, "slow", "throttle", "a"), fieldSum(t, srv, "slow", "throttle", "b"); a != sent || b != sent {
			t.Errorf("throttle: %d requests and accepts made, the store holds %d and %d", sent, a, b)
		}
	})
}

// A sync whose reply is lost after the server ran the script (a reset, a
// client timeout) was pushed again by the next sync: the fleet counted
// those events twice, and this process saw its own first push as the
// other processes' events.
func TestLostReplyNotCountedTwice(t *testing.T) {
	srv := redistest.Start(t)
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		st := srvStore{srv: srv, lose: func() bool { return n.Add(1)%2 == 1 }} // every other reply lost, the first included
		b, _ := retry.NewBudget(retry.BudgetConfig{})
		e, err := StartBudget(Config{Name: "x", Prefix: "lost", Logger: quiet}, st, b)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		for range 100 {
			account.RecordAttempt(b)
		}
		time.Sleep(650 * time.Millisecond)
		a := fieldSum(t, srv, "lost", "budget", "a")
		t.Logf("a=%d calls=%d", a, n.Load())
		if a != 100 {
			t.Errorf("100 first attempts made, the store counts %d", a)
		}
	})
}

// A slot field that Lua's tonumber takes for a number but HINCRBY refuses
// ("1e3", "01"): the script wrote part of a sync, then failed, so every sync
// failed and re-added the same counts. Such a slot must not be written at
// all (foreign data: logged once, counted as 0).
func TestForeignCountLikeValueNotWritten(t *testing.T) {
	for _, v := range []string{"1e3", "01"} {
		t.Run(v, func(t *testing.T) { foreignCountLike(t, v) })
	}
}

func foreignCountLike(t *testing.T, v string) {
	srv := redistest.Start(t)
	synctest.Test(t, func(t *testing.T) {
		win := 100 * time.Second // slot 10 s: the current slot does not change during the test
		b, _ := retry.NewBudget(retry.BudgetConfig{Window: win})
		keys := Keys("foreign", "budget", win)
		k := time.Now().UnixNano() / int64(win/slots)
		for _, kk := range []int64{k, k + 1} {
			if _, err := srv.Do("HSET", keys(kk)[0], "b", v); err != nil {
				t.Fatal(err)
			}
		}
		e, err := StartBudget(Config{Name: "x", Prefix: "foreign", Logger: quiet}, srvStore{srv: srv}, b)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		for range 5 {
			for range 10 {
				account.RecordAttempt(b)
			}
			account.AllowRetry(b)
			time.Sleep(110 * time.Millisecond)
		}
		syncs, failures, _ := e.Stats()
		if failures > 0 || !e.Shared() {
			t.Errorf("bad data in the slot made syncs fail: %d failures, %d syncs", failures, syncs)
		}
		for _, kk := range []int64{k, k + 1} {
			if a, _ := srv.Do("HGET", keys(kk)[0], "a"); a != "" {
				t.Errorf("the slot holding foreign data was written: a = %s", a)
			}
		}
	})
}

// A Budget used before it is shared: its first sync pushed its whole
// history (LocalCounts since it was made) into the current slot, dated
// now, so another process granted retries on first attempts long gone.
func TestHistoryNotPushed(t *testing.T) {
	srv := redistest.Start(t)
	synctest.Test(t, func(t *testing.T) {
		cfg := retry.BudgetConfig{Ratio: 0.1, MinPerSecond: -1, Window: 300 * time.Millisecond}
		x, _ := retry.NewBudget(cfg)
		y, _ := retry.NewBudget(cfg)
		for range 10000 {
			account.RecordAttempt(x)
		}
		time.Sleep(350 * time.Millisecond) // x's first attempts leave its window
		ey, err := StartBudget(Config{Name: "y", Prefix: "hist", Logger: quiet}, srvStore{srv: srv}, y)
		if err != nil {
			t.Fatal(err)
		}
		defer ey.Close()
		ex, err := StartBudget(Config{Name: "x", Prefix: "hist", Logger: quiet}, srvStore{srv: srv}, x)
		if err != nil {
			t.Fatal(err)
		}
		defer ex.Close()
		if !waitForSyncs(ex, 2) || !waitForSyncs(ey, 2) {
			t.Fatal("no syncs")
		}
		// Nobody made a first attempt in the window: with no floor, a retry
		// is refused, as one ideal shared Budget would.
		if a := fieldSum(t, srv, "hist", "budget", "a"); a != 0 || account.AllowRetry(y) {
			t.Errorf("the store holds %d first attempts made before sharing; y granted a retry: %v", a, a != 0)
		}
	})
}

// A store down when sharing starts: what is counted until it is back is
// dropped like any counts that could not be pushed for too long, not
// pushed at once, dated then, into one slot.
func TestStoreDownAtStartNotPushedLate(t *testing.T) {
	srv := redistest.Start(t)
	synctest.Test(t, func(t *testing.T) {
		cfg := retry.BudgetConfig{Ratio: 0.1, MinPerSecond: -1, Window: 300 * time.Millisecond}
		x, _ := retry.NewBudget(cfg)
		y, _ := retry.NewBudget(cfg)
		var down atomic.Bool
		down.Store(true)
		ex, err := StartBudget(Config{Name: "x", Prefix: "down", Logger: quiet}, srvStore{srv: srv, down: &down}, x)
		if err != nil {
			t.Fatal(err)
		}
		defer ex.Close()
		for range 10000 {
			account.RecordAttempt(x)
		}
		time.Sleep(500 * time.Millisecond) // longer than an interval plus max(slot, interval), and than the window
		ey, err := StartBudget(Config{Name: "y", Prefix: "down", Logger: quiet}, srvStore{srv: srv}, y)
		if err != nil {
			t.Fatal(err)
		}
		defer ey.Close()
		down.Store(false)
		if !waitForSyncs(ex, 2) || !waitForSyncs(ey, 2) {
			t.Fatal("no syncs")
		}
		if a := fieldSum(t, srv, "down", "budget", "a"); a != 0 || account.AllowRetry(y) {
			t.Errorf("the store holds %d first attempts made while it was down, long gone; y granted a retry: %v", a, a != 0)
		}
	})
}

// Sharing a Budget again after Close continues from what its first share
// pushed: nothing counted twice, nothing counted from before a share.
func TestReshareContinues(t *testing.T) {
	srv := redistest.Start(t)
	synctest.Test(t, func(t *testing.T) {
		b, _ := retry.NewBudget(retry.BudgetConfig{Window: 10 * time.Second})
		record := func(n int) {
			for range n {
				account.RecordAttempt(b)
			}
		}
		cfg := Config{Name: "x", Prefix: "reshare", Logger: quiet}
		record(100) // before sharing: not pushed
		e, err := StartBudget(cfg, srvStore{srv: srv}, b)
		if err != nil {
			t.Fatal(err)
		}
		record(50)
		if !waitForSyncs(e, 2) {
			t.Fatal("no syncs")
		}
		e.Close()
		record(20) // between two shares: not pushed
		e, err = StartBudget(cfg, srvStore{srv: srv}, b)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		record(25)
		if !waitForSyncs(e, 2) {
			t.Fatal("no syncs")
		}
		if a := fieldSum(t, srv, "reshare", "budget", "a"); a != 75 {
			t.Errorf("75 first attempts made while shared, the store counts %d", a)
		}
	})
}

// waitForSyncs waits up to a second for n more successful syncs of e.
func waitForSyncs(e *Engine, n int64) bool {
	before, _, _ := e.Stats()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if s, _, _ := e.Stats(); s >= before+n {
			return true
		}
	}
	return false
}

// A reserve of 10¹⁵ retries (MinPerSecond 10¹⁴, valid): Lua writes a
// number of 10¹⁴ or more as "1e+15", which is not a count, so the next
// sync read the process's own hold as foreign data, logged it and leased
// nothing. Leases and holds are capped at 10⁹.
func TestHugeReserveLease(t *testing.T) {
	srv := redistest.Start(t)
	synctest.Test(t, func(t *testing.T) {
		var logs strings.Builder
		var mu sync.Mutex
		log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return logs.Write(p)
		}), nil))
		b, _ := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: 1e14, Window: 10 * time.Second})
		e, err := StartBudget(Config{Name: "x", Prefix: "huge", Logger: log}, srvStore{srv: srv}, b)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if !waitForSyncs(e, 3) {
			t.Fatal("no syncs")
		}
		n := 0
		for n < 1000 && account.AllowRetry(b) {
			n++
		}
		mu.Lock()
		defer mu.Unlock()
		if n != 1000 || strings.Contains(logs.String(), "did not write") {
			syncs, failures, _ := e.Stats()
			t.Errorf("granted %d of 1000 with a reserve of 10¹⁵ (%d syncs, %d failed); log:\n%s", n, syncs, failures, logs.String())
		}
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Until the first sync answers, a shared Budget grants no floor-funded
// retry (it holds a lease of 0); once that sync fails, it decides locally
// with its own full reserve, as after any failed sync, and a first sync
// that succeeds hands it the fleet's lease.
func TestFirstSyncPendingThenLocalOrLeased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := retry.BudgetConfig{Ratio: -1, MinPerSecond: 5, Window: 2 * time.Second} // reserve 10
		m := newMemStore()
		m.setDown(true)
		m.gate = make(chan struct{}) // the first sync waits until the check below
		b, _ := retry.NewBudget(cfg)
		e, err := StartBudget(Config{Name: "x", Prefix: "pending", Logger: quiet}, m, b)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if account.AllowRetry(b) {
			t.Error("a retry granted before the first sync answered")
		}
		close(m.gate)
		synctest.Wait() // the first sync failed
		if _, f, _ := e.Stats(); f != 1 || e.Shared() {
			t.Fatalf("failures %d, shared %v: want the first sync failed", f, e.Shared())
		}
		n := 0
		for account.AllowRetry(b) {
			n++
		}
		if n != 10 {
			t.Errorf("local after a failed first sync: %d retries granted, want its own reserve, 10", n)
		}
		m.setDown(false)
		time.Sleep(DefaultInterval)
		synctest.Wait()
		if !e.Shared() {
			t.Fatal("did not join")
		}
	})
}

// blockStore never answers: every call waits for its context.
type blockStore struct{}

func (blockStore) Load(ctx context.Context, _ string) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}
func (blockStore) EvalSHA(ctx context.Context, _ string, _, _ []string) ([]int64, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// The lease a Budget holds until its first sync answers lasts as long as
// that sync may: with a sync interval of two centuries (valid) its end
// overflowed, was in the past, and the Budget refused even the retries
// its own first attempts earned.
func TestFirstSyncPendingLongInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := retry.NewBudget(retry.BudgetConfig{Ratio: 1, MinPerSecond: -1})
		const centuries = 200 * 365 * 24 * time.Hour
		e, err := StartBudget(Config{Name: "x", Prefix: "long", Interval: centuries, Logger: quiet}, blockStore{}, b)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		account.RecordAttempt(b)
		if !account.AllowRetry(b) {
			t.Error("before the first sync answered, the retry one first attempt earns (Ratio 1) was refused")
		}
	})
}
