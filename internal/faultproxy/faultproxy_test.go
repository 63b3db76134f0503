package faultproxy

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retrytest"
)

func send(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	b.WriteString("*" + itoa(len(args)) + "\r\n")
	for _, a := range args {
		b.WriteString("$" + itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	v, err := retrytest.RESP().Reply(bufio.NewReader(c), "")
	return string(v), err
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestProxyFaults(t *testing.T) {
	srv := redistest.Start(t)
	p := Start(t, srv.Addr(), Config{})
	if v, err := send(t, p.Addr(), "SET", "k", "1"); err != nil || v != "+OK\r\n" {
		t.Fatalf("pass: %q, %v", v, err)
	}
	// Reset after forwarding: the client sees an error, the server applied it.
	p.SetConfig(Config{ResetAfter: 1})
	if v, err := send(t, p.Addr(), "INCR", "k"); err == nil {
		t.Fatalf("reset after: got reply %q, want an error", v)
	}
	if v, _ := srv.Do("GET", "k"); v != "2" {
		t.Fatalf("after a reset-after INCR, k = %q; want 2 (applied)", v)
	}
	// Drop before forwarding: the client sees an error, the server never saw it.
	p.SetConfig(Config{DropBefore: 1})
	if _, err := send(t, p.Addr(), "INCR", "k"); err == nil {
		t.Fatal("drop before: want an error")
	}
	if v, _ := srv.Do("GET", "k"); v != "2" {
		t.Fatalf("after a dropped INCR, k = %q; want 2 (not applied)", v)
	}
	if n, _ := srv.CommandCalls("incr"); n != 1 {
		t.Fatalf("server ran INCR %d times; want 1", n)
	}
	if p.Resets() != 1 || p.Drops() != 1 {
		t.Fatalf("Resets %d Drops %d; want 1 1", p.Resets(), p.Drops())
	}
	if pa, r, d := p.Counts("incr"); pa != 0 || r != 1 || d != 1 {
		t.Fatalf("Counts(incr) = %d %d %d; want 0 1 1", pa, r, d)
	}
	// Match limits faults to the commands named.
	p.SetConfig(Config{ResetAfter: 1, Match: func(n string) bool { return n == "incr" }})
	if v, err := send(t, p.Addr(), "GET", "k"); err != nil || v != "$1\r\n2\r\n" {
		t.Fatalf("GET with faults on INCR only: %q, %v", v, err)
	}
	// Refusing: dial fails, then works again on the same address.
	if err := p.SetRefuse(true); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("dial while refusing: want an error")
	}
	if err := p.SetRefuse(false); err != nil {
		t.Fatal(err)
	}
	p.SetConfig(Config{})
	if v, err := send(t, p.Addr(), "PING"); err != nil || v != "+PONG\r\n" {
		t.Fatalf("after refusing: %q, %v", v, err)
	}
	if _, err := (Config{ResetAfter: 0.8, DropBefore: 0.3}).rule(); err == nil {
		t.Fatal("fractions summing over 1 accepted")
	}
}
