package retryvalkey_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/faultproxy"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retrytest"
	"github.com/retrykit/retry/retryvalkey"
)

// TestNotSentRetried: while the proxy refuses connections, an INCR cannot
// be sent; it is retried and applied exactly once.
func TestNotSentRetried(t *testing.T) {
	srv := redistest.Start(t)
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{})
	ctx := context.Background()
	c := newClient(t, px.Addr(), retry.Policy{Initial: 2 * time.Millisecond, MaxDelay: 10 * time.Millisecond, Jitter: retry.NoJitter(), MaxAttempts: 100})
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
	if !errors.Is(err, retry.ErrNotSent) || !errors.As(err, &re) || re.Attempts != 3 {
		t.Fatalf("INCR against a refusing proxy: %v; want retry.ErrNotSent after 3 attempts", err)
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

// TestRefusalsResent: replies that say the server did not run the command
// (READONLY, MASTERDOWN, BUSY), which valkey-go neither repeats nor keeps
// the command for, are sent again as the policy says, for any command,
// INCR included, which is then applied once; a refusal that outlasts the
// policy ends with the last reply after MaxAttempts sends.
func TestRefusalsResent(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	var o retrytest.Recorder
	c := newClient(t, srv.Addr(), retry.Policy{Initial: 2 * time.Millisecond, MaxDelay: 10 * time.Millisecond, MaxAttempts: 200, Observer: &o})
	// resent fails t unless the last call was sent more than once.
	resent := func(t *testing.T) {
		t.Helper()
		if done, _ := o.Done(); done.Attempt < 2 {
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
		var o retrytest.Recorder
		c2 := newClient(t, srv.Addr(), retry.Policy{Initial: time.Millisecond, MaxDelay: time.Millisecond, MaxAttempts: 3, Observer: &o})
		defer replicaOfNothing(t, srv, true)()
		err := c2.Do(ctx, c2.B().Incr().Key("n").Build()).Error()
		if ve, ok := valkey.IsValkeyErr(err); !ok || !strings.HasPrefix(ve.Error(), "READONLY") {
			t.Fatalf("INCR on a replica: %v (%T); want the READONLY reply", err, err)
		}
		done, _ := o.Done()
		var re *retry.Error
		if o.Count(retry.EventAttempt) != 3 || o.Count(retry.EventRetry) != 2 || !errors.As(done.Err, &re) ||
			re.Attempts != 3 || re.Reason != retry.ReasonAttempts {
			t.Fatalf("events %s, done %+v; want 3 attempts, 2 retries, given up after 3 attempts", &o, done)
		}
	})
}

// TestDialTimeoutRetried: a dial that times out sent nothing, so even INCR
// is sent again; the timeout is not taken for the end of the caller's
// context. One that keeps timing out ends with retry.ErrNotSent.
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
	c, err := retryvalkey.NewClient(context.Background(), opt, retry.Policy{Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxAttempts: 3})
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
	if !errors.Is(err, retry.ErrNotSent) || !errors.As(err, &re) || re.Attempts != 3 {
		t.Fatalf("INCR with every dial timing out: %v; want retry.ErrNotSent after 3 attempts", err)
	}
}
