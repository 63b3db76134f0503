package retryredis_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/faultproxy"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retryredis"
	"github.com/retrykit/retry/retrytest"
)

// testPolicy retries quickly: waits of a few milliseconds, bounded.
func testPolicy() retry.Policy {
	return retry.Policy{
		Initial:     time.Millisecond,
		MaxDelay:    5 * time.Millisecond,
		Jitter:      retry.FullJitter(),
		MaxAttempts: 20,
		MaxElapsed:  10 * time.Second,
	}
}

// newClient returns a client without its own retries, instrumented with p.
func newClient(t testing.TB, addr string, p retry.Policy, opts ...retryredis.Option) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, PoolSize: 4})
	t.Cleanup(func() { c.Close() })
	if err := retryredis.AddHook(context.Background(), c, p, opts...); err != nil {
		t.Fatal(err)
	}
	return c
}

func only(names ...string) func(string) bool {
	return func(n string) bool {
		for _, x := range names {
			if n == x {
				return true
			}
		}
		return false
	}
}

func atoi(t testing.TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// TestINCRThroughFaults is the experiment of the README: a proxy resets the
// connection after forwarding 20 % of INCR and GET commands, before the
// reply. go-redis with its defaults retries the lost INCRs and overshoots;
// through retrykit the counter equals the INCRs the server applied once
// each, and every GET succeeds.
func TestINCRThroughFaults(t *testing.T) {
	const calls = 1000
	srv := redistest.Start(t)
	cfg := faultproxy.Config{ResetAfter: 0.2, Seed: 1, Match: only("incr", "get")}
	ctx := context.Background()

	t.Run("go-redis defaults", func(t *testing.T) {
		px := faultproxy.Start(t, srv.Addr(), cfg)
		// go-redis's own backoff waits (10 ms .. 1 s each) run on the
		// bubble's clock: the same calls, without seconds of real sleep.
		synctest.Test(t, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: px.Addr()}) // MaxRetries 3, 10 ms .. 1 s
			defer c.Close()
			failed := 0
			for range calls {
				if err := c.Incr(ctx, "plain").Err(); err != nil {
					failed++
				}
			}
			v, _ := srv.Do("GET", "plain")
			t.Logf("go-redis defaults: %d INCR calls, %d failed, counter %s (proxy reset %d)", calls, failed, v, px.Resets())
			if atoi(t, v) <= calls {
				t.Fatalf("counter %s: expected go-redis's own retries to overshoot %d", v, calls)
			}
		})
	})

	t.Run("retrykit", func(t *testing.T) {
		px := faultproxy.Start(t, srv.Addr(), cfg)
		c := newClient(t, px.Addr(), testPolicy())
		before, _ := srv.CommandCalls("incr")
		ok, maybe, gets := 0, 0, 0
		last := 0
		for range calls {
			n, err := c.Incr(ctx, "rk").Result()
			switch {
			case err == nil:
				ok++
				if int(n) <= last {
					t.Fatalf("INCR returned %d after %d", n, last)
				}
				last = int(n)
			case errors.Is(err, retry.ErrMaybeApplied):
				maybe++
			default:
				t.Fatalf("INCR: %v; want success or retry.ErrMaybeApplied", err)
			}
			if _, err := c.Get(ctx, "rk").Result(); err != nil {
				t.Fatalf("GET through faults: %v", err)
			}
			gets++
		}
		v, _ := srv.Do("GET", "rk")
		after, _ := srv.CommandCalls("incr")
		_, incrResets, _ := px.Counts("incr")
		_, getResets, _ := px.Counts("get")
		t.Logf("retrykit: %d INCR calls, %d succeeded, %d may have been applied; counter %s; server ran INCR %d times; %d GETs all succeeded (%d GET replies lost and retried)",
			calls, ok, maybe, v, after-before, gets, getResets)
		if got := atoi(t, v); got > calls || got != ok+maybe || int64(maybe) != incrResets || after-before != calls {
			t.Fatalf("counter %d, server INCRs %d, successes %d, maybe-applied %d, proxy INCR resets %d: an INCR was applied twice or lost",
				got, after-before, ok, maybe, incrResets)
		}
		if maybe == 0 || getResets == 0 {
			t.Fatal("no faults were injected")
		}
	})

	t.Run("retrykit with drops", func(t *testing.T) {
		// Half the faults drop the command before the server sees it; the
		// client cannot tell them apart from resets, so it retries
		// neither, and the counter equals successes plus the resets.
		px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 0.1, DropBefore: 0.1, Seed: 2, Match: only("incr", "get")})
		c := newClient(t, px.Addr(), testPolicy())
		ok := 0
		for range 300 {
			err := c.Incr(ctx, "drops").Err()
			if err == nil {
				ok++
			} else if !errors.Is(err, retry.ErrMaybeApplied) {
				t.Fatal(err)
			}
			if err := c.Get(ctx, "drops").Err(); err != nil {
				t.Fatalf("GET: %v", err)
			}
		}
		v, _ := srv.Do("GET", "drops")
		_, resets, drops := px.Counts("incr")
		if atoi(t, v) != ok+int(resets) || drops == 0 {
			t.Fatalf("counter %s; want successes %d + resets %d (drops %d)", v, ok, resets, drops)
		}
	})
}

// TestNotSentRetried: while the proxy refuses connections, an INCR fails to
// dial; it was not sent, so it is retried and applied exactly once.
func TestNotSentRetried(t *testing.T) {
	srv := redistest.Start(t)
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{})
	ctx := context.Background()
	// Back after two refused dials: fewer than PoolSize (4) failed dials in
	// a row, after which go-redis stops dialing and probes once a second.
	c := newClient(t, px.Addr(), retry.Policy{Initial: 2 * time.Millisecond, MaxDelay: 10 * time.Millisecond, Jitter: retry.NoJitter(), MaxAttempts: 100,
		Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			if e.Kind == retry.EventRetry && e.Attempt == 2 {
				px.SetRefuse(false)
			}
		})})
	if err := px.SetRefuse(true); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Incr(ctx, "k").Result(); err != nil || n != 1 {
		t.Fatalf("INCR while refused then back: %d, %v", n, err)
	}
	if n, _ := srv.CommandCalls("incr"); n != 1 {
		t.Fatalf("server ran INCR %d times; want 1", n)
	}

	// Refused for good: the error says it was not sent.
	c2 := newClient(t, px.Addr(), retry.Policy{Initial: time.Millisecond, MaxDelay: time.Millisecond, MaxAttempts: 3})
	px.SetRefuse(true)
	defer px.SetRefuse(false)
	err := c2.Incr(ctx, "k").Err()
	var re *retry.Error
	if !errors.Is(err, retry.ErrNotSent) || errors.Is(err, retry.ErrMaybeApplied) || !errors.As(err, &re) || re.Attempts != 3 {
		t.Fatalf("INCR against a refusing proxy: %v; want retry.ErrNotSent after 3 attempts", err)
	}
}

// TestWrongTypeNotRetried: a reply saying the request is wrong comes back
// at once, as go-redis returns it, after one call at the server.
func TestWrongTypeNotRetried(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Addr(), testPolicy())
	ctx := context.Background()
	if err := c.Set(ctx, "s", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	err := c.LPush(ctx, "s", "x").Err()
	if _, ok := err.(redis.Error); !ok || !redis.HasErrorPrefix(err, "WRONGTYPE") {
		t.Fatalf("LPUSH on a string: %v (%T); want the WRONGTYPE redis.Error", err, err)
	}
	if n, _ := srv.CommandCalls("lpush"); n != 1 {
		t.Fatalf("server ran LPUSH %d times; want 1", n)
	}
	if err := c.Do(ctx, "NOSUCHCOMMAND").Err(); err == nil {
		t.Fatal("unknown command: want an error")
	}
	if n, _ := srv.CommandCalls("get"); n != 0 {
		t.Fatalf("unexpected GETs: %d", n)
	}
}

// TestRefusalRetried: a write sent to a replica is refused with READONLY
// without being run; it is retried (even INCR) until the replica is
// promoted, and applied once.
func TestRefusalRetried(t *testing.T) {
	srv := redistest.Start(t)
	dead := redistest.Start(t) // a primary that goes away
	deadPort := strconv.Itoa(dead.Port())
	dead.Stop()
	ctx := context.Background()
	c := newClient(t, srv.Addr(), retry.Policy{Initial: 2 * time.Millisecond, MaxDelay: 10 * time.Millisecond, MaxAttempts: 200})
	if _, err := srv.Do("REPLICAOF", "127.0.0.1", deadPort); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(60*time.Millisecond, func() { srv.Do("REPLICAOF", "NO", "ONE") })
	if n, err := c.Incr(ctx, "k").Result(); err != nil || n != 1 {
		t.Fatalf("INCR on a replica being promoted: %d, %v", n, err)
	}
	// One INCR applied; the refused ones were counted as failed calls.
	if v, _ := srv.Do("GET", "k"); v != "1" {
		t.Fatalf("k = %q; want 1", v)
	}
	// A refusal that outlasts the policy ends with the READONLY error.
	if _, err := srv.Do("REPLICAOF", "127.0.0.1", deadPort); err != nil {
		t.Fatal(err)
	}
	defer srv.Do("REPLICAOF", "NO", "ONE")
	c2 := newClient(t, srv.Addr(), retry.Policy{Initial: time.Millisecond, MaxDelay: time.Millisecond, MaxAttempts: 3})
	err := c2.Incr(ctx, "k").Err()
	var re *retry.Error
	if !redis.HasErrorPrefix(errors.Unwrap(errors.Unwrap(err)), "READONLY") || !errors.As(err, &re) || re.Attempts != 3 ||
		errors.Is(err, retry.ErrMaybeApplied) || errors.Is(err, retry.ErrNotSent) {
		t.Fatalf("INCR on a replica: %v; want READONLY after 3 attempts", err)
	}
}

// TestMarkSafe: the caller may declare one call safe to repeat.
func TestMarkSafe(t *testing.T) {
	srv := redistest.Start(t)
	var once atomic.Bool
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: func(n string) bool { return n == "incr" && once.CompareAndSwap(false, true) }})
	c := newClient(t, px.Addr(), testPolicy())
	if err := c.Incr(retryredis.MarkSafe(context.Background()), "k").Err(); err != nil {
		t.Fatalf("INCR marked safe after a lost reply: %v", err)
	}
	if v, _ := srv.Do("GET", "k"); v != "2" {
		t.Fatalf("k = %q; want 2 (applied, then repeated as the caller allowed)", v)
	}
}

// TestPipelines: a pipeline or MULTI/EXEC is repeated after a lost reply
// only when every command in it is safe.
func TestPipelines(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	var fault atomic.Value // string: name of the command whose next reply is lost
	fault.Store("")
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: func(n string) bool {
		return fault.CompareAndSwap(n, "")
	}})
	c := newClient(t, px.Addr(), testPolicy())
	calls := func(name string) int { n, _ := srv.CommandCalls(name); return n }

	t.Run("multi with incr not repeated", func(t *testing.T) {
		fault.Store("exec")
		before := calls("exec")
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, "tx")
			p.Get(ctx, "tx")
			return nil
		})
		if !errors.Is(err, retry.ErrMaybeApplied) {
			t.Fatalf("TxPipelined: %v; want retry.ErrMaybeApplied", err)
		}
		if n := calls("exec") - before; n != 1 {
			t.Fatalf("EXEC ran %d times; want 1", n)
		}
		if v, _ := srv.Do("GET", "tx"); v != "1" {
			t.Fatalf("tx = %q; want 1", v)
		}
	})
	t.Run("multi with safe commands repeated", func(t *testing.T) {
		fault.Store("exec")
		before := calls("exec")
		cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "a", "1", 0)
			p.Get(ctx, "a")
			return nil
		})
		if err != nil || cmds[1].(*redis.StringCmd).Val() != "1" {
			t.Fatalf("TxPipelined: %v", err)
		}
		if n := calls("exec") - before; n != 2 {
			t.Fatalf("EXEC ran %d times; want 2 (lost, repeated)", n)
		}
	})
	t.Run("pipeline with incr not repeated", func(t *testing.T) {
		fault.Store("get")
		before := calls("incr")
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, "pl")
			p.Get(ctx, "pl")
			return nil
		})
		if !errors.Is(err, retry.ErrMaybeApplied) {
			t.Fatalf("Pipelined: %v; want retry.ErrMaybeApplied", err)
		}
		if n := calls("incr") - before; n != 1 {
			t.Fatalf("INCR ran %d times; want 1", n)
		}
	})
	t.Run("pipeline of reads repeated", func(t *testing.T) {
		fault.Store("get")
		cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Get(ctx, "a")
			p.Exists(ctx, "a")
			return nil
		})
		if err != nil || cmds[0].(*redis.StringCmd).Val() != "1" || cmds[1].(*redis.IntCmd).Val() != 1 {
			t.Fatalf("Pipelined reads: %v", err)
		}
	})
	t.Run("pipeline with a wrong command not repeated", func(t *testing.T) {
		before := calls("get")
		cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.LPush(ctx, "a", "x")
			p.Get(ctx, "a")
			return nil
		})
		if !redis.HasErrorPrefix(err, "WRONGTYPE") || cmds[1].Err() != nil {
			t.Fatalf("Pipelined: %v, %v", err, cmds[1].Err())
		}
		if n := calls("get") - before; n != 1 {
			t.Fatalf("GET ran %d times; want 1", n)
		}
	})
}

// TestRecoverUnderLoad: steady reads from two goroutines while the
// server's clients are killed, the server is paused, and the server is
// restarted empty: every read succeeds within the policy, and nothing
// leaks.
func TestRecoverUnderLoad(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		// redistest's own wait for the restarted server, stopped by its cleanup.
		goleak.IgnoreAnyFunction("github.com/retrykit/retry/internal/testproc.Start.func1"))
	srv := redistest.Start(t)
	ctx := context.Background()
	p := retry.Policy{Initial: 2 * time.Millisecond, MaxDelay: 50 * time.Millisecond, Jitter: retry.FullJitter(),
		MaxAttempts: retry.Unlimited, MaxElapsed: 5 * time.Second}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1, PoolSize: 4})
	if err := retryredis.AddHook(ctx, c, p); err != nil {
		t.Fatal(err)
	}
	for name, disrupt := range map[string]func(){
		"client kill": func() {
			if _, err := srv.Do("CLIENT", "KILL", "TYPE", "normal"); err != nil {
				t.Error(err)
			}
		},
		"client pause": func() {
			if _, err := srv.Do("CLIENT", "PAUSE", "100", "ALL"); err != nil {
				t.Error(err)
			}
		},
		"restart": func() { srv.Restart() },
	} {
		var wg sync.WaitGroup
		var reads, failures atomic.Int64
		var worst atomic.Int64
		stop := make(chan struct{})
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					start := time.Now()
					err := c.Get(ctx, "missing").Err()
					if err != nil && err != redis.Nil {
						failures.Add(1)
						t.Errorf("%s: GET: %v", name, err)
						return
					}
					reads.Add(1)
					if d := int64(time.Since(start)); d > worst.Load() {
						worst.Store(d)
					}
				}
			})
		}
		time.Sleep(30 * time.Millisecond)
		disrupt()
		time.Sleep(150 * time.Millisecond)
		close(stop)
		wg.Wait()
		t.Logf("%s: %d reads, %d failed, slowest %v", name, reads.Load(), failures.Load(), time.Duration(worst.Load()))
	}
	c.Close()
}

func TestAddHookRefuses(t *testing.T) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	if err := retryredis.AddHook(ctx, c, retry.Policy{}); !errors.Is(err, retryredis.ErrClientRetries) {
		t.Fatalf("default MaxRetries: %v; want ErrClientRetries", err)
	}
	c1 := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer c1.Close()
	if err := retryredis.AddHook(ctx, c1, retry.Policy{}); !errors.Is(err, retryredis.ErrClientRetries) ||
		!strings.Contains(err.Error(), "DialerRetries") {
		t.Fatalf("default DialerRetries: %v; want ErrClientRetries naming DialerRetries", err)
	}
	c2 := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	defer c2.Close()
	if err := retryredis.AddHook(ctx, c2, retry.Policy{MaxAttempts: -5}); !errors.Is(err, retry.ErrInvalidPolicy) {
		t.Fatalf("invalid policy: %v", err)
	}
	if err := retryredis.AddHook(ctx, c2, retry.Policy{}); err != nil {
		t.Fatalf("first AddHook: %v", err)
	}
	if err := retryredis.AddHook(ctx, c2, retry.Policy{}); err == nil {
		t.Fatal("second AddHook on the same client: want an error")
	}
	if err := retryredis.AddHook(ctx, nil, retry.Policy{}); err == nil {
		t.Fatal("nil client accepted")
	}
}

// TestPolicyGuards: the policy's Observer sees the hook's attempts, and a
// Budget that grants no retry stops the loop after the first attempt.
func TestPolicyGuards(t *testing.T) {
	srv := redistest.Start(t)
	var lose atomic.Int32 // GET replies still to lose
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: func(n string) bool {
		return n == "get" && lose.Add(-1) >= 0
	}})
	ctx := context.Background()
	var rec retrytest.Recorder
	p := testPolicy()
	p.Observer = &rec
	c := newClient(t, px.Addr(), p)
	lose.Store(1)
	if err := c.Get(ctx, "k").Err(); err != redis.Nil {
		t.Fatalf("GET after one lost reply: %v; want redis.Nil", err)
	}
	if rec.Count(retry.EventAttempt) != 2 || rec.Count(retry.EventRetry) != 1 || rec.Count(retry.EventDone) != 1 {
		t.Fatalf("events %s; want 2 attempts, 1 retry, 1 done", &rec)
	}

	b, err := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	p2 := testPolicy()
	p2.Budget = b
	c2 := newClient(t, px.Addr(), p2)
	passed, reset, _ := px.Counts("get")
	lose.Store(1)
	err = c2.Get(ctx, "k").Err()
	if !errors.Is(err, retry.ErrBudgetRefused) || !errors.Is(err, retry.ErrMaybeApplied) {
		t.Fatalf("GET with a budget that grants nothing: %v; want ErrBudgetRefused", err)
	}
	if p2, r2, _ := px.Counts("get"); p2+r2-passed-reset != 1 {
		t.Fatalf("proxy saw %d GETs; want 1", p2+r2-passed-reset)
	}
}

// timingOutDialer dials addr, except while fail is above zero: then it
// spends one of fail on a dial that times out for real (a deadline already
// passed), whose error matches context.DeadlineExceeded as every net
// timeout does.
func timingOutDialer(fail *atomic.Int32) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if fail.Add(-1) >= 0 {
			return (&net.Dialer{Timeout: time.Nanosecond}).DialContext(ctx, network, addr)
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
}

// TestDialTimeoutRetried: a dial that times out sent nothing, so even INCR
// is sent again; the timeout is not taken for the end of the caller's
// context. One that keeps timing out ends with retry.ErrNotSent.
func TestDialTimeoutRetried(t *testing.T) {
	srv := redistest.Start(t)
	var fail atomic.Int32
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1, PoolSize: 4, Dialer: timingOutDialer(&fail)})
	t.Cleanup(func() { c.Close() })
	if err := retryredis.AddHook(context.Background(), c, retry.Policy{Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fail.Store(2)
	if n, err := c.Incr(ctx, "k").Result(); err != nil || n != 1 {
		t.Fatalf("INCR after two dial timeouts: %d, %v; want 1", n, err)
	}
	if n, _ := srv.CommandCalls("incr"); n != 1 {
		t.Fatalf("server ran INCR %d times; want 1", n)
	}
	fail.Store(100)
	c = redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1, PoolSize: 4, Dialer: timingOutDialer(&fail)})
	t.Cleanup(func() { c.Close() })
	if err := retryredis.AddHook(ctx, c, retry.Policy{Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	err := c.Incr(ctx, "k").Err()
	var re *retry.Error
	if !errors.Is(err, retry.ErrNotSent) || !errors.As(err, &re) || re.Attempts != 3 {
		t.Fatalf("INCR with every dial timing out: %v; want retry.ErrNotSent after 3 attempts", err)
	}
}
