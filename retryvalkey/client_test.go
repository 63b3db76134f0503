package retryvalkey_test

import (
	"context"
	"crypto/tls"
	"errors"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
	"go.uber.org/goleak"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/faultproxy"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retryvalkey"
)

func testPolicy() retry.Policy {
	return retry.Policy{
		Initial:     time.Millisecond,
		MaxDelay:    5 * time.Millisecond,
		Jitter:      retry.FullJitter,
		MaxAttempts: 20,
	}
}

func option(addr string) valkey.ClientOption {
	return valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true}
}

func newClient(t testing.TB, addr string, p retry.Policy) valkey.Client {
	t.Helper()
	c, err := retryvalkey.NewClient(option(addr), p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
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

// TestINCRThroughFaults: a proxy resets the connection after forwarding
// 20 % of INCR and GET commands, before the reply. valkey-go does not
// repeat INCR by itself, but does once it is marked ToRetryable, and then
// overshoots; through retrykit the counter equals the INCRs applied once
// each, and every GET succeeds.
func TestINCRThroughFaults(t *testing.T) {
	const calls = 1000
	srv := redistest.Start(t)
	cfg := faultproxy.Config{ResetAfter: 0.2, Seed: 1, Match: only("incr", "get")}
	ctx := context.Background()

	t.Run("valkey-go, INCR marked ToRetryable", func(t *testing.T) {
		px := faultproxy.Start(t, srv.Addr(), cfg)
		c, err := valkey.NewClient(option(px.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		failed := 0
		for range calls {
			if err := c.Do(ctx, c.B().Incr().Key("plain").Build().ToRetryable()).Error(); err != nil {
				failed++
			}
		}
		v, _ := srv.Do("GET", "plain")
		t.Logf("valkey-go, INCR ToRetryable: %d INCR calls, %d failed, counter %s (proxy reset %d)", calls, failed, v, px.Resets())
		if atoi(t, v) <= calls {
			t.Fatalf("counter %s: expected valkey-go's own retries to overshoot %d", v, calls)
		}
	})

	t.Run("retrykit", func(t *testing.T) {
		px := faultproxy.Start(t, srv.Addr(), cfg)
		c := newClient(t, px.Addr(), testPolicy())
		before, _ := srv.CommandCalls("incr")
		ok, maybe, last := 0, 0, int64(0)
		for range calls {
			n, err := c.Do(ctx, c.B().Incr().Key("rk").Build()).AsInt64()
			switch {
			case err == nil:
				ok++
				if n <= last {
					t.Fatalf("INCR returned %d after %d", n, last)
				}
				last = n
			case errors.Is(err, retryvalkey.ErrMaybeApplied):
				maybe++
			default:
				t.Fatalf("INCR: %v; want success or ErrMaybeApplied", err)
			}
			if err := c.Do(ctx, c.B().Get().Key("rk").Build()).Error(); err != nil {
				t.Fatalf("GET through faults: %v", err)
			}
		}
		v, _ := srv.Do("GET", "rk")
		after, _ := srv.CommandCalls("incr")
		_, incrResets, _ := px.Counts("incr")
		_, getResets, _ := px.Counts("get")
		t.Logf("retrykit: %d INCR calls, %d succeeded, %d may have been applied; counter %s; server ran INCR %d times; %d GETs all succeeded (%d GET replies lost and retried)",
			calls, ok, maybe, v, after-before, calls, getResets)
		if got := atoi(t, v); got > calls || got != ok+maybe || int64(maybe) != incrResets || after-before != calls {
			t.Fatalf("counter %d, server INCRs %d, successes %d, maybe-applied %d, proxy INCR resets %d", got, after-before, ok, maybe, incrResets)
		}
		if maybe == 0 || getResets == 0 {
			t.Fatal("no faults were injected")
		}
	})
}

// TestNotSentRetried: while the proxy refuses connections, an INCR cannot
// be sent; it is retried and applied exactly once.
func TestNotSentRetried(t *testing.T) {
	srv := redistest.Start(t)
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{})
	ctx := context.Background()
	c := newClient(t, px.Addr(), retry.Policy{Initial: 2 * time.Millisecond, MaxDelay: 10 * time.Millisecond, Jitter: retry.NoJitter, MaxAttempts: 100})
	if err := px.SetRefuse(true); err != nil {
		t.Fatal(err)
	}
	notice(c)
	time.AfterFunc(50*time.Millisecond, func() { px.SetRefuse(false) })
	if n, err := c.Do(ctx, c.B().Incr().Key("k").Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("INCR while refused then back: %d, %v", n, err)
	}
	if n, _ := srv.CommandCalls("incr"); n != 1 {
		t.Fatalf("server ran INCR %d times; want 1", n)
	}
	px.SetRefuse(true)
	defer px.SetRefuse(false)
	c2 := newClientNoDial(t, px, retry.Policy{Initial: time.Millisecond, MaxDelay: time.Millisecond, MaxAttempts: 3})
	err := c2.Do(ctx, c2.B().Incr().Key("k").Build()).Error()
	var re *retry.Error
	if !errors.Is(err, retryvalkey.ErrNotSent) || !errors.As(err, &re) || re.Attempts != 3 {
		t.Fatalf("INCR against a refusing proxy: %v; want ErrNotSent after 3 attempts", err)
	}
}

// newClientNoDial creates the client while the proxy accepts, then lets
// the caller refuse: valkey-go dials at creation.
func newClientNoDial(t *testing.T, px *faultproxy.Proxy, p retry.Policy) valkey.Client {
	px.SetRefuse(false)
	c := newClient(t, px.Addr(), p)
	px.SetRefuse(true)
	notice(c)
	return c
}

// notice makes valkey-go find out that its connection was reset: refusing
// also resets the open connection, and valkey-go learns it only when it
// next writes. Without this, the next command would meet the write error
// on the dead connection (which counts as "may have been applied", since
// other commands' writes may have preceded it) rather than a refused dial.
func notice(c valkey.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	c.Do(ctx, c.B().Ping().Build())
}

// TestWrongTypeNotRetried: a reply saying the request is wrong comes back
// at once, as valkey-go returns it, after one call at the server.
func TestWrongTypeNotRetried(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Addr(), testPolicy())
	ctx := context.Background()
	if err := c.Do(ctx, c.B().Set().Key("s").Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	err := c.Do(ctx, c.B().Lpush().Key("s").Element("x").Build()).Error()
	if ve, ok := valkey.IsValkeyErr(err); !ok || ve.Error()[:9] != "WRONGTYPE" {
		t.Fatalf("LPUSH on a string: %v; want the WRONGTYPE reply", err)
	}
	if err := c.Do(ctx, c.B().Llen().Key("s").Build()).Error(); err == nil {
		t.Fatal("LLEN on a string: want WRONGTYPE")
	}
	if n, _ := srv.CommandCalls("lpush"); n != 1 {
		t.Fatalf("server ran LPUSH %d times; want 1", n)
	}
	if n, _ := srv.CommandCalls("llen"); n != 1 {
		t.Fatalf("server ran LLEN (read-only) %d times; want 1", n)
	}
}

// TestPolicyDrivesValkeyLoop: valkey-go's own loop stops at MaxAttempts,
// the waits come from the policy, the Observer sees every attempt, and
// idempotent writes and MarkSafe calls are repeated.
func TestPolicyDrivesValkeyLoop(t *testing.T) {
	srv := redistest.Start(t)
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: only("get")})
	var mu sync.Mutex
	kinds := map[retry.EventKind]int{}
	p := retry.Policy{Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxAttempts: 3,
		Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			mu.Lock()
			kinds[e.Kind]++
			mu.Unlock()
		})}
	c := newClient(t, px.Addr(), p)
	ctx := context.Background()
	err := c.Do(ctx, c.B().Get().Key("k").Build()).Error()
	if !errors.Is(err, retryvalkey.ErrMaybeApplied) {
		t.Fatalf("GET with every reply lost: %v; want ErrMaybeApplied", err)
	}
	if pa, r, _ := px.Counts("get"); pa+r != 3 {
		t.Fatalf("proxy saw %d GETs; want 3 (MaxAttempts)", pa+r)
	}
	mu.Lock()
	if kinds[retry.EventAttempt] != 3 || kinds[retry.EventRetry] != 2 || kinds[retry.EventDone] != 1 {
		t.Fatalf("events %v; want 3 attempts, 2 retries, 1 done", kinds)
	}
	mu.Unlock()

	var once atomic.Bool
	px.SetConfig(faultproxy.Config{ResetAfter: 1, Match: func(n string) bool {
		return (n == "set" || n == "incr") && once.CompareAndSwap(false, true)
	}})
	if err := c.Do(ctx, c.B().Set().Key("a").Value("1").Build()).Error(); err != nil {
		t.Fatalf("SET (idempotent) after a lost reply: %v", err)
	}
	once.Store(false)
	if err := c.Do(retryvalkey.MarkSafe(ctx), c.B().Incr().Key("n").Build()).Error(); err != nil {
		t.Fatalf("INCR marked safe after a lost reply: %v", err)
	}
	if v, _ := srv.Do("GET", "n"); v != "2" {
		t.Fatalf("n = %q; want 2 (applied, then repeated as the caller allowed)", v)
	}
}

// TestRecoverUnderLoad: steady reads while the server's clients are
// killed, the server is paused and the server is restarted empty: every
// read succeeds within the policy, and nothing leaks.
func TestRecoverUnderLoad(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("github.com/retrykit/retry/internal/redistest.(*Server).start.func1"))
	srv := redistest.Start(t)
	ctx := context.Background()
	p := retry.Policy{Initial: 2 * time.Millisecond, MaxDelay: 50 * time.Millisecond, Jitter: retry.FullJitter,
		MaxAttempts: retry.Unlimited, MaxElapsed: 5 * time.Second}
	c, err := retryvalkey.NewClient(option(srv.Addr()), p)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		disrupt func()
	}{
		{"client kill", func() {
			if _, err := srv.Do("CLIENT", "KILL", "TYPE", "normal"); err != nil {
				t.Error(err)
			}
		}},
		{"client pause", func() {
			if _, err := srv.Do("CLIENT", "PAUSE", "100", "ALL"); err != nil {
				t.Error(err)
			}
		}},
		{"restart", func() { srv.Restart() }},
	} {
		var wg sync.WaitGroup
		var reads atomic.Int64
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
					if err := c.Do(ctx, c.B().Get().Key("missing").Build()).Error(); err != nil && !valkey.IsValkeyNil(err) {
						t.Errorf("%s: GET: %v", tc.name, err)
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
		tc.disrupt()
		time.Sleep(150 * time.Millisecond)
		close(stop)
		wg.Wait()
		t.Logf("%s: %d reads, slowest %v", tc.name, reads.Load(), time.Duration(worst.Load()))
	}
	c.Close()
}

func TestNewClientRefuses(t *testing.T) {
	srv := redistest.Start(t)
	for name, tc := range map[string]struct {
		opt valkey.ClientOption
		p   retry.Policy
	}{
		"DisableRetry":       {valkey.ClientOption{InitAddress: []string{srv.Addr()}, DisableRetry: true}, retry.Policy{}},
		"RetryDelay":         {valkey.ClientOption{InitAddress: []string{srv.Addr()}, RetryDelay: func(int, valkey.Completed, error) time.Duration { return 0 }}, retry.Policy{}},
		"AttemptTimeout":     {option(srv.Addr()), retry.Policy{AttemptTimeout: time.Second}},
		"DecorrelatedJitter": {option(srv.Addr()), retry.Policy{Jitter: retry.DecorrelatedJitter}},
		"invalid policy":     {option(srv.Addr()), retry.Policy{MaxAttempts: -5}},
	} {
		if c, err := retryvalkey.NewClient(tc.opt, tc.p); err == nil {
			c.Close()
			t.Errorf("%s: accepted", name)
		}
	}
}

// faultOnce returns a client, with testPolicy, behind a proxy in front of
// srv, and the name of the command (lower case) whose next forward the
// proxy follows by resetting the connection, once: store a name to arm it.
func faultOnce(t *testing.T, srv *redistest.Server) (valkey.Client, *faultproxy.Proxy, *atomic.Value) {
	var fault atomic.Value
	fault.Store("")
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: func(n string) bool { return fault.CompareAndSwap(n, "") }})
	return newClient(t, px.Addr(), testPolicy()), px, &fault
}

// TestDoMulti: a pipeline of safe commands is repeated after a lost
// reply; one holding an INCR is not.
func TestDoMulti(t *testing.T) {
	srv := redistest.Start(t)
	c, _, fault := faultOnce(t, srv)
	ctx := context.Background()

	fault.Store("get")
	r := c.DoMulti(ctx, c.B().Set().Key("a").Value("1").Build(), c.B().Get().Key("a").Build())
	if v, err := r[1].ToString(); err != nil || v != "1" {
		t.Fatalf("safe pipeline after a lost reply: %q, %v", v, err)
	}

	fault.Store("get")
	before, _ := srv.CommandCalls("incr")
	r = c.DoMulti(ctx, c.B().Incr().Key("n").Build(), c.B().Get().Key("n").Build())
	if err := r[1].Error(); !errors.Is(err, retryvalkey.ErrMaybeApplied) {
		t.Fatalf("pipeline with INCR: %v; want ErrMaybeApplied", err)
	}
	if after, _ := srv.CommandCalls("incr"); after-before != 1 {
		t.Fatalf("INCR ran %d times; want 1", after-before)
	}

	fault.Store("exec")
	r = c.DoMulti(ctx, c.B().Multi().Build(), c.B().Set().Key("b").Value("2").Build(), c.B().Exec().Build())
	if err := r[2].Error(); err != nil {
		t.Fatalf("MULTI SET EXEC after a lost reply: %v", err)
	}
	if n, _ := srv.CommandCalls("exec"); n != 2 {
		t.Fatalf("EXEC ran %d times; want 2 (lost, repeated)", n)
	}
}

// TestBudgetStopsValkeyLoop: a Budget that grants no retry stops
// valkey-go's own loop after the first attempt.
func TestBudgetStopsValkeyLoop(t *testing.T) {
	srv := redistest.Start(t)
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: only("get")})
	b, err := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	p := testPolicy()
	p.Budget = b
	c := newClient(t, px.Addr(), p)
	if err := c.Do(context.Background(), c.B().Get().Key("k").Build()).Error(); !errors.Is(err, retryvalkey.ErrMaybeApplied) {
		t.Fatalf("GET with every reply lost: %v; want ErrMaybeApplied", err)
	}
	if pa, r, _ := px.Counts("get"); pa+r != 1 {
		t.Fatalf("proxy saw %d GETs; want 1 (the budget refused every retry)", pa+r)
	}
}

// replicaOfNothing makes srv a replica of a primary that is gone: it
// refuses writes with READONLY, and reads with MASTERDOWN once
// replica-serve-stale-data is off. promote undoes it.
func replicaOfNothing(t *testing.T, srv *redistest.Server, staleReads bool) (promote func()) {
	t.Helper()
	dead := redistest.Start(t)
	port := strconv.Itoa(dead.Port())
	dead.Stop()
	stale := "yes"
	if !staleReads {
		stale = "no"
	}
	if _, err := srv.Do("CONFIG", "SET", "replica-serve-stale-data", stale); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do("REPLICAOF", "127.0.0.1", port); err != nil {
		t.Fatal(err)
	}
	return func() {
		srv.Do("REPLICAOF", "NO", "ONE")
		srv.Do("CONFIG", "SET", "replica-serve-stale-data", "yes")
	}
}

// countingObserver counts the events of each kind and remembers the last
// EventDone.
type countingObserver struct {
	mu    sync.Mutex
	kinds map[retry.EventKind]int
	done  retry.Event
}

func (o *countingObserver) Observe(_ context.Context, e retry.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.kinds == nil {
		o.kinds = map[retry.EventKind]int{}
	}
	o.kinds[e.Kind]++
	if e.Kind == retry.EventDone {
		o.done = e
	}
}

func (o *countingObserver) snapshot() (map[retry.EventKind]int, retry.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.kinds), o.done
}

// TestRefusalsResent: replies that say the server did not run the command
// (READONLY, MASTERDOWN, BUSY), which valkey-go neither repeats nor keeps
// the command for, are sent again as the policy says, for any command,
// INCR included, which is then applied once; a refusal that outlasts the
// policy ends with the last reply after MaxAttempts sends.
func TestRefusalsResent(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	var o countingObserver
	c := newClient(t, srv.Addr(), retry.Policy{Initial: 2 * time.Millisecond, MaxDelay: 10 * time.Millisecond, MaxAttempts: 200, Observer: &o})
	// resent fails t unless the last call was sent more than once.
	resent := func(t *testing.T) {
		t.Helper()
		if _, done := o.snapshot(); done.Attempt < 2 {
			t.Fatalf("the call ended after %d sends; want it refused, then sent again", done.Attempt)
		}
	}

	t.Run("READONLY", func(t *testing.T) {
		promote := replicaOfNothing(t, srv, true)
		time.AfterFunc(60*time.Millisecond, promote)
		if n, err := c.Do(ctx, c.B().Incr().Key("n").Build()).AsInt64(); err != nil || n != 1 {
			t.Fatalf("INCR on a replica being promoted: %d, %v; want 1", n, err)
		}
		resent(t)
		if v, _ := srv.Do("GET", "n"); v != "1" {
			t.Fatalf("n = %q; want 1 (applied once)", v)
		}
	})

	t.Run("MASTERDOWN", func(t *testing.T) {
		if _, err := srv.Do("SET", "k", "v"); err != nil {
			t.Fatal(err)
		}
		promote := replicaOfNothing(t, srv, false)
		time.AfterFunc(60*time.Millisecond, promote)
		if v, err := c.Do(ctx, c.B().Get().Key("k").Build()).ToString(); err != nil || v != "v" {
			t.Fatalf("GET on a replica without its primary: %q, %v; want v", v, err)
		}
		resent(t)
	})

	t.Run("pipeline", func(t *testing.T) {
		promote := replicaOfNothing(t, srv, true)
		time.AfterFunc(60*time.Millisecond, promote)
		r := c.DoMulti(ctx,
			c.B().Get().Key("k").Build(),
			c.B().Incr().Key("p").Build(),
			c.B().Set().Key("q").Value("1").Build())
		if v, err := r[0].ToString(); err != nil || v != "v" {
			t.Fatalf("pipeline GET: %q, %v; want v", v, err)
		}
		if n, err := r[1].AsInt64(); err != nil || n != 1 {
			t.Fatalf("pipeline INCR: %d, %v; want 1", n, err)
		}
		if v, err := r[2].ToString(); err != nil || v != "OK" {
			t.Fatalf("pipeline SET: %q, %v; want OK", v, err)
		}
		resent(t)
		if v, _ := srv.Do("GET", "p"); v != "1" {
			t.Fatalf("p = %q; want 1 (applied once)", v)
		}
	})

	t.Run("pipeline, a success after a refusal", func(t *testing.T) {
		promote := replicaOfNothing(t, srv, true)
		r := c.DoMulti(ctx, c.B().Incr().Key("x").Build(), c.B().Get().Key("k").Build())
		promote()
		// Sent again, the INCR would run after the GET meant to follow it.
		if err := r[0].Error(); err == nil || !strings.HasPrefix(err.Error(), "READONLY") {
			t.Fatalf("INCR refused before a GET that succeeded: %v; want the READONLY reply, not sent again", err)
		}
		if v, err := r[1].ToString(); err != nil || v != "v" {
			t.Fatalf("GET: %q, %v", v, err)
		}
		if v, _ := srv.Do("GET", "x"); v != "" {
			t.Fatalf("x = %q; want unset", v)
		}
	})

	t.Run("BUSY", func(t *testing.T) {
		if _, err := srv.Do("CONFIG", "SET", "busy-reply-threshold", "20"); err != nil {
			t.Fatal(err)
		}
		before, err := srv.CommandCalls("incr")
		if err != nil {
			t.Fatal(err)
		}
		script := make(chan error, 1)
		go func() {
			_, err := srv.Do("EVAL", "local i = 0 while true do i = i + 1 end", "0")
			script <- err
		}()
		// Wait until the script runs (the server answers BUSY), then kill
		// it in 60 ms.
		for deadline := time.Now().Add(2 * time.Second); ; {
			if _, err := srv.Do("PING"); err != nil && strings.HasPrefix(err.Error(), "BUSY") {
				break
			}
			select {
			case err := <-script:
				t.Fatalf("the script ended before it made the server busy: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatal("the server never answered BUSY")
			}
			time.Sleep(2 * time.Millisecond)
		}
		time.AfterFunc(60*time.Millisecond, func() { srv.Do("SCRIPT", "KILL") })
		if _, err := c.Do(ctx, c.B().Incr().Key("b").Build()).AsInt64(); err != nil {
			t.Fatalf("INCR while a script runs: %v", err)
		}
		resent(t)
		if err := <-script; err == nil {
			t.Fatal("the busy script ended without being killed")
		}
		if after, _ := srv.CommandCalls("incr"); after-before != 1 {
			t.Fatalf("INCR ran %d times; want 1", after-before)
		}
	})

	t.Run("outlasts the policy", func(t *testing.T) {
		var o countingObserver
		c2 := newClient(t, srv.Addr(), retry.Policy{Initial: time.Millisecond, MaxDelay: time.Millisecond, MaxAttempts: 3, Observer: &o})
		defer replicaOfNothing(t, srv, true)()
		err := c2.Do(ctx, c2.B().Incr().Key("n").Build()).Error()
		if ve, ok := valkey.IsValkeyErr(err); !ok || !strings.HasPrefix(ve.Error(), "READONLY") {
			t.Fatalf("INCR on a replica: %v (%T); want the READONLY reply", err, err)
		}
		kinds, done := o.snapshot()
		var re *retry.Error
		if kinds[retry.EventAttempt] != 3 || kinds[retry.EventRetry] != 2 || !errors.As(done.Err, &re) ||
			re.Attempts != 3 || re.Reason != retry.ReasonAttempts {
			t.Fatalf("events %v, done %+v; want 3 attempts, 2 retries, given up after 3 attempts", kinds, done)
		}
	})
}

// TestDialTimeoutRetried: a dial that times out sent nothing, so even INCR
// is sent again; the timeout is not taken for the end of the caller's
// context. One that keeps timing out ends with ErrNotSent.
func TestDialTimeoutRetried(t *testing.T) {
	srv := redistest.Start(t)
	var fail atomic.Int32 // while above zero, each dial spends one on a real timeout
	opt := option(srv.Addr())
	opt.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
		if fail.Add(-1) >= 0 {
			return (&net.Dialer{Timeout: time.Nanosecond}).DialContext(ctx, "tcp", dst)
		}
		return d.DialContext(ctx, "tcp", dst)
	}
	c, err := retryvalkey.NewClient(opt, retry.Policy{Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	// Break the connection, and let valkey-go notice while every dial
	// times out.
	fail.Store(1 << 20)
	if _, err := srv.Do("CLIENT", "KILL", "TYPE", "normal"); err != nil {
		t.Fatal(err)
	}
	notice(c)

	fail.Store(2)
	if n, err := c.Do(ctx, c.B().Incr().Key("k").Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("INCR after two dial timeouts: %d, %v; want 1", n, err)
	}
	if n, _ := srv.CommandCalls("incr"); n != 1 {
		t.Fatalf("server ran INCR %d times; want 1", n)
	}
	if _, err := srv.Do("CLIENT", "KILL", "TYPE", "normal"); err != nil {
		t.Fatal(err)
	}
	fail.Store(1 << 20)
	notice(c)
	err = c.Do(ctx, c.B().Incr().Key("k").Build()).Error()
	var re *retry.Error
	if !errors.Is(err, retryvalkey.ErrNotSent) || !errors.As(err, &re) || re.Attempts != 3 {
		t.Fatalf("INCR with every dial timing out: %v; want ErrNotSent after 3 attempts", err)
	}
}

// TestServerTableMakesArbitraryReadsSafe: valkey-go does not know that a
// GET built with Arbitrary is read-only; the server's command table, read
// by NewClient, does, so its lost reply is retried. An Arbitrary INCR is
// not.
func TestServerTableMakesArbitraryReadsSafe(t *testing.T) {
	srv := redistest.Start(t)
	if _, err := srv.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	c, px, fault := faultOnce(t, srv)
	ctx := context.Background()
	fault.Store("get")
	if v, err := c.Do(ctx, c.B().Arbitrary("GET").Keys("k").Build()).ToString(); err != nil || v != "v" {
		t.Fatalf("Arbitrary GET after a lost reply: %q, %v; want v", v, err)
	}
	if pa, r, _ := px.Counts("get"); pa+r != 2 {
		t.Fatalf("proxy saw %d GETs; want 2 (lost, repeated)", pa+r)
	}
	fault.Store("incr")
	if err := c.Do(ctx, c.B().Arbitrary("INCR").Keys("n").Build()).Error(); !errors.Is(err, retryvalkey.ErrMaybeApplied) {
		t.Fatalf("Arbitrary INCR after a lost reply: %v; want ErrMaybeApplied", err)
	}
}

// TestThrottledAfterLostReply: a SET refused (BUSY, a script runs), sent
// again by this client's loop, its reply lost after the server applied it;
// then the Throttle rejects every further send, valkey-go's loop's and
// this client's. Nothing was sent after the second SET, but the call's
// error must still say that it may have been applied (and still match
// retry.ErrThrottled).
func TestThrottledAfterLostReply(t *testing.T) {
	srv := redistest.Start(t)
	if _, err := srv.Do("CONFIG", "SET", "busy-reply-threshold", "10"); err != nil {
		t.Fatal(err)
	}
	var sets atomic.Int64
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: func(n string) bool {
		return n == "set" && sets.Add(1) == 2
	}})
	th, _ := retry.NewThrottle(retry.ThrottleConfig{Accepted: func(error) bool { return true }})
	p := retry.Policy{Initial: 300 * time.Millisecond, MaxDelay: 300 * time.Millisecond, Jitter: retry.NoJitter,
		MaxAttempts: 3, Throttle: th}
	var driven atomic.Bool
	kept := make(chan string, 4) // what an Observer that keeps EventDone.Err reads later
	var readers sync.WaitGroup
	defer readers.Wait()
	p.Observer = retry.ObserverFunc(func(_ context.Context, e retry.Event) {
		if e.Kind == retry.EventDone && e.Err != nil {
			readers.Go(func() { kept <- e.Err.Error() }) // the error must not change under it (-race)
		}
		if e.Kind == retry.EventAttempt && e.Attempt == 2 && driven.CompareAndSwap(false, true) {
			for range 1 << 20 { // from now on it rejects with probability 1 - 2^-20
				th.Record(false)
			}
		}
	})
	c := newClient(t, px.Addr(), p)
	done := make(chan struct{})
	script, err := valkey.NewClient(option(srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer script.Close()
	go func() {
		defer close(done)
		script.Do(context.Background(), script.B().Eval().Script(redistest.SlowIncr).Numkeys(1).Key("x").Build())
	}()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := srv.Do("PING"); err != nil && strings.HasPrefix(err.Error(), "BUSY") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the script never made the server busy")
		}
	}
	err = c.Do(context.Background(), c.B().Set().Key("k").Value("v").Build()).Error()
	<-done
	if v, _ := srv.Do("GET", "k"); v != "v" || sets.Load() != 2 {
		t.Fatalf("k = %q after %d SETs; want v after 2 (the second SET applied)", v, sets.Load())
	}
	if !errors.Is(err, retry.ErrThrottled) || !errors.Is(err, retryvalkey.ErrMaybeApplied) || errors.Is(err, retryvalkey.ErrNotSent) {
		t.Fatalf("SET applied, then throttled: %v; want ErrMaybeApplied and ErrThrottled", err)
	}
}

// The events of valkey-go's loop report MaxAttempts as retry.Do does: the
// default for a policy that leaves it zero.
func TestInnerEventsReportMaxAttemptsAsDo(t *testing.T) {
	srv := redistest.Start(t)
	var once atomic.Bool
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: func(n string) bool {
		return n == "get" && once.CompareAndSwap(false, true)
	}})
	var mu sync.Mutex
	var got []retry.Event
	p := retry.Policy{Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond,
		Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			mu.Lock()
			got = append(got, e)
			mu.Unlock()
		})}
	c := newClient(t, px.Addr(), p)
	if err := c.Do(context.Background(), c.B().Get().Key("k").Build()).Error(); err != nil && !valkey.IsValkeyNil(err) {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	retried := false
	for _, e := range got {
		retried = retried || e.Kind == retry.EventRetry
		if e.MaxAttempts != retry.DefaultMaxAttempts {
			t.Errorf("%v/%d: MaxAttempts %d, want %d", e.Kind, e.Attempt, e.MaxAttempts, retry.DefaultMaxAttempts)
		}
	}
	if !retried {
		t.Fatalf("events %v: valkey-go's loop did not retry the lost reply", got)
	}
}
