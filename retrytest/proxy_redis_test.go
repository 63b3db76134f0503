package retrytest

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/internal/redistest"
)

// TestProxyLargeReply: a command and a reply larger than the proxy's
// buffers pass through whole and at once: a nested array of '|' strings
// (EVAL), a large command, and the server's command table (COMMAND, the
// reply that retryvalkey.NewClient and retryredis read at start and that
// stalled until their 5 s timeout about one time in three).
func TestProxyLargeReply(t *testing.T) {
	srv := redistest.Start(t)
	p, err := NewProxy(ProxyConfig{Target: srv.Addr(), Protocol: RESP})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
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
