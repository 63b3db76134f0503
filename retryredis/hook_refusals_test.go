package retryredis_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/redistest"
)

// TestMaxClientsAtConnect: "ERR max number of clients reached" is
// documented as a refusal that is always retried, whatever the command,
// and a connection that fails before the command is written leaves the
// command not sent. With go-redis the refusal comes at connection time:
// the server answers HELLO with it and closes, the handshake's next write
// fails, and the INCR is never written. It must be retried (retry.ErrNotSent
// while it fails), not reported as "may have been applied".
func TestMaxClientsAtConnect(t *testing.T) {
	srv := redistest.Start(t)
	if _, err := srv.Do("CONFIG", "SET", "maxclients", "1"); err != nil {
		t.Fatal(err)
	}
	hold, err := net.Dial("tcp", srv.Addr()) // takes the only client slot
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	if _, err := hold.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := hold.Read(buf); err != nil || !strings.HasPrefix(string(buf), "+PONG") {
		t.Fatalf("holding connection: %q, %v", buf, err)
	}

	ctx := context.Background()

	// While no slot frees up, the INCR is never written: retry.ErrNotSent after
	// every attempt.
	p := testPolicy()
	p.MaxAttempts = 3
	c := newClient(t, srv.Addr(), p)
	err = c.Incr(ctx, "n").Err()
	var re *retry.Error
	if !errors.Is(err, retry.ErrNotSent) || errors.Is(err, retry.ErrMaybeApplied) || !errors.As(err, &re) || re.Attempts != 3 {
		t.Fatalf("INCR never written (max clients at every connect): %v (retry.ErrNotSent %v, retry.ErrMaybeApplied %v); want retry.ErrNotSent after 3 attempts",
			err, errors.Is(err, retry.ErrNotSent), errors.Is(err, retry.ErrMaybeApplied))
	}
	if _, err := hold.Write([]byte("EXISTS n\r\n")); err != nil {
		t.Fatal(err)
	}
	if n, err := hold.Read(buf); err != nil || string(buf[:n]) != ":0\r\n" {
		t.Fatalf("EXISTS n: %q, %v; want :0 (never applied)", buf[:n], err)
	}

	// Once a slot frees up, the retry applies it.
	p.MaxAttempts = 5
	p.Observer = retry.ObserverFunc(func(_ context.Context, e retry.Event) {
		if e.Kind == retry.EventRetry {
			hold.Close() // a client slot frees up
		}
	})
	c2 := newClient(t, srv.Addr(), p)
	if err := c2.Incr(ctx, "n").Err(); err != nil {
		t.Fatalf("INCR refused by max clients at connect, then a slot freed: %v (retry.ErrNotSent %v, retry.ErrMaybeApplied %v); want it retried and applied",
			err, errors.Is(err, retry.ErrNotSent), errors.Is(err, retry.ErrMaybeApplied))
	}
	if v, err := c2.Get(ctx, "n").Result(); err != nil || v != "1" {
		t.Fatalf("n = %q, %v; want 1", v, err)
	}
}

// TestTxRefused: a MULTI/EXEC of safe commands refused during a
// failover (READONLY at queue time, so EXEC answers EXECABORT and nothing
// ran) is a refusal of a transaction whose commands are all safe: it must
// be repeated, as the same commands are in a pipeline and alone.
func TestTxRefused(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	// A replica of a master that does not answer: writes are refused
	// with READONLY until it is promoted.
	if _, err := srv.Do("REPLICAOF", "127.0.0.1", "1"); err != nil {
		t.Fatal(err)
	}
	c := failoverClient(t, srv)

	for _, tx := range []bool{false, true} {
		if _, err := srv.Do("REPLICAOF", "127.0.0.1", "1"); err != nil {
			t.Fatal(err)
		}
		run := c.Pipelined
		if tx {
			run = c.TxPipelined
		}
		cmds, err := run(ctx, func(pl redis.Pipeliner) error {
			pl.Set(ctx, "a", "1", 0)
			pl.Get(ctx, "a")
			return nil
		})
		if err != nil {
			t.Fatalf("tx %v: refused (READONLY) then promoted: %v; want the refusal retried", tx, err)
		}
		if v := cmds[len(cmds)-1].(*redis.StringCmd).Val(); v != "1" {
			t.Fatalf("tx %v: GET a = %q; want 1", tx, v)
		}
		srv.Do("DEL", "a")
	}

	// A transaction with an unsafe command refused at queue time is not
	// repeated (the rule of pipelines), and one with a wrong command is not.
	if _, err := srv.Do("REPLICAOF", "127.0.0.1", "1"); err != nil {
		t.Fatal(err)
	}
	_, err := c.TxPipelined(ctx, func(pl redis.Pipeliner) error {
		pl.Incr(ctx, "n")
		return nil
	})
	if !redis.HasErrorPrefix(err, "EXECABORT") {
		t.Fatalf("TxPipelined INCR refused: %v; want EXECABORT as go-redis returns it", err)
	}
	if _, err := srv.Do("REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatal(err)
	}
	_, err = c.TxPipelined(ctx, func(pl redis.Pipeliner) error {
		pl.Do(ctx, "nosuchcommand")
		pl.Get(ctx, "a")
		return nil
	})
	if !redis.HasErrorPrefix(err, "EXECABORT") {
		t.Fatalf("TxPipelined with an unknown command: %v; want EXECABORT as go-redis returns it", err)
	}
}

// failoverClient returns an instrumented client of srv (5 attempts) whose
// loop promotes srv (REPLICAOF NO ONE: the failover completes) before each
// retry, so that a write refused with READONLY succeeds when sent again.
func failoverClient(t *testing.T, srv *redistest.Server) *redis.Client {
	p := testPolicy()
	p.MaxAttempts = 5
	p.Observer = retry.ObserverFunc(func(_ context.Context, e retry.Event) {
		if e.Kind == retry.EventRetry {
			srv.Do("REPLICAOF", "NO", "ONE")
		}
	})
	return newClient(t, srv.Addr(), p)
}
