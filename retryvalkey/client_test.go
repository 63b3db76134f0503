package retryvalkey_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
	"go.uber.org/goleak"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/internal/faultproxy"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retryvalkey"
)

func testPolicy() retry.Policy {
	return retry.Policy{
		Initial:     time.Millisecond,
		MaxDelay:    5 * time.Millisecond,
		Jitter:      retry.FullJitter(),
		MaxAttempts: 20,
	}
}

func option(addr string) valkey.ClientOption {
	return valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true}
}

func newClient(t testing.TB, addr string, p retry.Policy) valkey.Client {
	t.Helper()
	c, err := retryvalkey.NewClient(context.Background(), option(addr), p)
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
			case errors.Is(err, retry.ErrMaybeApplied):
				maybe++
			default:
				t.Fatalf("INCR: %v; want success or retry.ErrMaybeApplied", err)
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

// TestRecoverUnderLoad: steady reads while the server's clients are
// killed, the server is paused and the server is restarted empty: every
// read succeeds within the policy, and nothing leaks.
func TestRecoverUnderLoad(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("github.com/retrykit/retry/internal/testproc.Start.func1"))
	srv := redistest.Start(t)
	ctx := context.Background()
	p := retry.Policy{Initial: 2 * time.Millisecond, MaxDelay: 50 * time.Millisecond, Jitter: retry.FullJitter(),
		MaxAttempts: retry.Unlimited, MaxElapsed: 5 * time.Second}
	c, err := retryvalkey.NewClient(context.Background(), option(srv.Addr()), p)
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
		"DisableRetry":   {valkey.ClientOption{InitAddress: []string{srv.Addr()}, DisableRetry: true}, retry.Policy{}},
		"RetryDelay":     {valkey.ClientOption{InitAddress: []string{srv.Addr()}, RetryDelay: func(int, valkey.Completed, error) time.Duration { return 0 }}, retry.Policy{}},
		"AttemptTimeout": {option(srv.Addr()), retry.Policy{AttemptTimeout: time.Second}},
		"invalid policy": {option(srv.Addr()), retry.Policy{MaxAttempts: -5}},
	} {
		if c, err := retryvalkey.NewClient(context.Background(), tc.opt, tc.p); err == nil {
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
	if err := c.Do(ctx, c.B().Arbitrary("INCR").Keys("n").Build()).Error(); !errors.Is(err, retry.ErrMaybeApplied) {
		t.Fatalf("Arbitrary INCR after a lost reply: %v; want retry.ErrMaybeApplied", err)
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
	th, _ := retry.NewThrottle(retry.ThrottleConfig{MaxProbability: 1, Accepted: func(error) bool { return true }})
	p := retry.Policy{Initial: 300 * time.Millisecond, MaxDelay: 300 * time.Millisecond, Jitter: retry.NoJitter(),
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
				account.Record(th, false)
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
	if !errors.Is(err, retry.ErrThrottled) || !errors.Is(err, retry.ErrMaybeApplied) || errors.Is(err, retry.ErrNotSent) {
		t.Fatalf("SET applied, then throttled: %v; want retry.ErrMaybeApplied and ErrThrottled", err)
	}
}
