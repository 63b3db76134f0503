package faultproxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/internal/redistest"
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
	v, err := readValue(bufio.NewReader(c), nil)
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
	if err := (Config{ResetAfter: 0.8, DropBefore: 0.3}).check(); err == nil {
		t.Fatal("fractions summing over 1 accepted")
	}
}

func TestReadValueRESP3(t *testing.T) {
	for _, in := range []string{
		"+OK\r\n", "-ERR x\r\n", ":12\r\n", "$3\r\nabc\r\n", "$-1\r\n", "_\r\n", "#t\r\n", ",1.5\r\n",
		"*2\r\n$1\r\na\r\n:1\r\n", "%1\r\n+k\r\n*1\r\n+v\r\n", "~1\r\n+x\r\n", "|1\r\n+a\r\n+b\r\n:7\r\n",
		"=7\r\ntxt:abc\r\n", "!3\r\nERR\r\n",
	} {
		got, err := readValue(bufio.NewReader(strings.NewReader(in+"+NEXT\r\n")), nil)
		if err != nil || !bytes.Equal(got, []byte(in)) {
			t.Errorf("readValue(%q) = %q, %v", in, got, err)
		}
	}
}

// pipes returns n arrays of one bulk string of size bytes of '|', in
// RESP, the reply an EVAL returning {{s}, {s}, ...} gets, together with
// its outer array header.
func pipes(n, size int) string {
	var b strings.Builder
	b.WriteString("*" + itoa(n) + "\r\n")
	s := strings.Repeat("|", size)
	for range n {
		b.WriteString("*1\r\n$" + itoa(size) + "\r\n" + s + "\r\n")
	}
	return b.String()
}

// TestReadValueLarge: a value larger than the bufio.Reader's buffer reads
// as one value, not more. The reader's buffer is refilled while an
// array's elements are read, so the array's header line, returned by
// ReadSlice, is overwritten; when the byte where its type was became a
// '|' (frequent in a COMMAND reply, which names subcommands "config|set"),
// the array was taken for an attribute and one more value was read: the
// proxy waited for a reply the server never sent.
func TestReadValueLarge(t *testing.T) {
	for _, in := range []string{
		pipes(200, 1000),
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5000\r\n" + strings.Repeat("|", 5000) + "\r\n",
		"|1\r\n+a\r\n+b\r\n" + pipes(10, 5000),
		"%2\r\n+a\r\n" + pipes(10, 1000) + "+b\r\n" + pipes(10, 1000),
	} {
		got, err := readValue(bufio.NewReader(strings.NewReader(in+"+NEXT\r\n")), nil)
		if err != nil || !bytes.Equal(got, []byte(in)) {
			t.Errorf("readValue of a %d-byte value: %d bytes, %v; want the value", len(in), len(got), err)
		}
	}
	cmd := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5000\r\n" + strings.Repeat("|", 5000) + "\r\n"
	raw, name, err := readCommand(bufio.NewReader(strings.NewReader(cmd + "*1\r\n$4\r\nPING\r\n")))
	if err != nil || string(raw) != cmd || name != "set" {
		t.Errorf("readCommand of a %d-byte SET: %d bytes, %q, %v; want the SET", len(cmd), len(raw), name, err)
	}
}

// TestProxyLargeReply: a command and a reply larger than the proxy's
// buffers pass through whole and at once: a nested array of '|' strings
// (EVAL), a large command, and the server's command table (COMMAND, the
// reply that retryvalkey.NewClient and retryredis read at start and that
// stalled until their 5 s timeout about one time in three).
func TestProxyLargeReply(t *testing.T) {
	srv := redistest.Start(t)
	p := Start(t, srv.Addr(), Config{})
	c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A stall shows as a read timeout: the replies come back in
	// milliseconds.
	c.SetDeadline(time.Now().Add(2 * time.Second))
	r := bufio.NewReader(c)
	roundTrip := func(want string, args ...string) {
		t.Helper()
		var b strings.Builder
		b.WriteString("*" + itoa(len(args)) + "\r\n")
		for _, a := range args {
			b.WriteString("$" + itoa(len(a)) + "\r\n" + a + "\r\n")
		}
		if _, err := c.Write([]byte(b.String())); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(want))
		if _, err := io.ReadFull(r, got); err != nil {
			t.Fatalf("%.20s...: reading a %d-byte reply through the proxy: %v", args[0], len(want), err)
		}
		if string(got) != want {
			t.Fatalf("%.20s...: reply through the proxy differs from the expected %d bytes", args[0], len(want))
		}
	}
	for range 3 {
		roundTrip(pipes(200, 1000), "EVAL",
			"local t = {} for i = 1, 200 do t[i] = {string.rep('|', 1000)} end return t", "0")
	}
	big := strings.Repeat("|", 5000)
	roundTrip("+OK\r\n", "SET", "k", big)
	roundTrip("$5000\r\n"+big+"\r\n", "GET", "k")
	// COMMAND: its size is the same through the proxy as straight from
	// the server (the order of its entries may vary).
	d, err := net.DialTimeout("tcp", srv.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := d.Write([]byte("*1\r\n$7\r\nCOMMAND\r\n")); err != nil {
		t.Fatal(err)
	}
	direct, err := readValue(bufio.NewReader(d), nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := c.Write([]byte("*1\r\n$7\r\nCOMMAND\r\n")); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(direct))
		if _, err := io.ReadFull(r, got); err != nil {
			t.Fatalf("COMMAND: reading its %d-byte reply through the proxy: %v", len(direct), err)
		}
		if got[0] != '*' {
			t.Fatalf("COMMAND through the proxy: %.40q", got)
		}
	}
	roundTrip("+PONG\r\n", "PING")
}

// FuzzReadValue: the RESP reader never panics, never reads past one value,
// and a value it accepts reads back the same.
func FuzzReadValue(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "*2\r\n$1\r\na\r\n:1\r\n", "%1\r\n+k\r\n*1\r\n+v\r\n", "|1\r\n+a\r\n+b\r\n:7\r\n", "$-1\r\n", "*-1\r\n", "$99999999999\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := readValue(bufio.NewReader(bytes.NewReader(in)), nil)
		if err != nil {
			return
		}
		if !bytes.HasPrefix(in, got) {
			t.Fatalf("read %q, not a prefix of %q", got, in)
		}
		again, err := readValue(bufio.NewReader(bytes.NewReader(got)), nil)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("re-read %q: %q, %v", got, again, err)
		}
	})
}
