package retryvalkey_test

import (
	"context"
	"errors"
	"github.com/retrykit/retry"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retryvalkey"
)

// relay is a byte-for-byte TCP relay on loopback whose client-side
// connections can be reset at will; the server sides stay open, so what
// the server received runs.
type relay struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn // client, server, client, server, ...
}

func startRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		r.mu.Lock()
		for _, c := range r.conns {
			c.Close()
		}
		r.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, c, s)
			r.mu.Unlock()
			wg.Go(func() { io.Copy(s, c) })
			wg.Go(func() { io.Copy(c, s) })
		}
	})
	return r
}

// resetClients resets every client-side connection (TCP RST).
func (r *relay) resetClients() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := 0; i < len(r.conns); i += 2 {
		if tc, ok := r.conns[i].(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		r.conns[i].Close()
	}
}

// TestClosedInFlight: valkey-go answers ErrClosing to commands it had
// already written when the client is closed while they are in flight. An
// EVAL that ran and an INCR written behind it, both applied by the server,
// must not come back as "not sent"; a call made after Close must.
func TestClosedInFlight(t *testing.T) {
	srv := redistest.Start(t)
	if _, err := srv.Do("CONFIG", "SET", "busy-reply-threshold", "10"); err != nil {
		t.Fatal(err)
	}
	rl := startRelay(t, srv.Addr())
	opt := option(rl.ln.Addr().String())
	opt.AlwaysPipelining = true // the INCR is written behind the EVAL at once
	c, err := retryvalkey.NewClient(context.Background(), opt, testPolicy())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	evalDone, incrDone := make(chan error, 1), make(chan error, 1)
	// Arbitrary without Keys: both go to the same connection.
	go func() { evalDone <- c.Do(ctx, c.B().Arbitrary("EVAL", redistest.SlowIncr, "1", "k").Build()).Error() }()
	for deadline := time.Now().Add(2 * time.Second); ; { // the script runs: its INCR is done
		if _, err := srv.Do("PING"); err != nil && strings.HasPrefix(err.Error(), "BUSY") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the script never made the server busy")
		}
		time.Sleep(time.Millisecond)
	}
	go func() { incrDone <- c.Do(ctx, c.B().Arbitrary("INCR", "j").Build()).Error() }()
	time.Sleep(20 * time.Millisecond) // the INCR is written behind the EVAL
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }() // waits for the calls in flight
	time.Sleep(20 * time.Millisecond)
	rl.resetClients()
	evalErr, incrErr := <-evalDone, <-incrDone
	<-closed
	for deadline := time.Now().Add(2 * time.Second); ; { // the server runs the INCR after the script
		if v, _ := srv.Do("GET", "j"); v == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server never ran the INCR written behind the script")
		}
		time.Sleep(2 * time.Millisecond)
	}
	for name, err := range map[string]error{"EVAL": evalErr, "INCR": incrErr} {
		if errors.Is(err, retry.ErrNotSent) || !errors.Is(err, retry.ErrMaybeApplied) {
			t.Errorf("%s applied, in flight when the client closed: %v; want retry.ErrMaybeApplied, not retry.ErrNotSent", name, err)
		}
	}
	if err := c.Do(ctx, c.B().Incr().Key("j").Build()).Error(); !errors.Is(err, retry.ErrNotSent) {
		t.Errorf("INCR after Close: %v; want retry.ErrNotSent", err)
	}
	for _, r := range c.DoMulti(ctx, c.B().Incr().Key("j").Build()) {
		if err := r.Error(); !errors.Is(err, retry.ErrNotSent) {
			t.Errorf("DoMulti after Close: %v; want retry.ErrNotSent", err)
		}
	}
}

// TestNodesAfterClose: the clients Nodes returns share their client's
// closed flag, so a command sent through one after the client's Close
// fails not sent, as through the client itself.
func TestNodesAfterClose(t *testing.T) {
	srv := redistest.Start(t)
	c, err := retryvalkey.NewClient(context.Background(), option(srv.Addr()), testPolicy())
	if err != nil {
		t.Fatal(err)
	}
	nodes := c.Nodes()
	c.Close()
	if len(nodes) == 0 {
		t.Fatal("no node clients")
	}
	for addr, n := range nodes {
		err := n.Do(context.Background(), n.B().Get().Key("k").Build()).Error()
		if !errors.Is(err, retry.ErrNotSent) || errors.Is(err, retry.ErrMaybeApplied) {
			t.Fatalf("GET through node %s after Close: %v; want retry.ErrNotSent", addr, err)
		}
	}
}
