package retrytest_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/retrytest"
)

// kvServer is a tiny RESP server on loopback (SET, GET, INCR, PING) that
// counts the commands it ran, for the proxy's tests without redis-server.
type kvServer struct {
	ln  net.Listener
	mu  sync.Mutex
	kv  map[string]int
	ran map[string]int
	wg  sync.WaitGroup
}

func startKV(t *testing.T) *kvServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &kvServer{ln: ln, kv: map[string]int{}, ran: map[string]int{}}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *kvServer) serve(c net.Conn) {
	defer c.Close()
	r := retrytest.RESP()
	br := bufio.NewReader(c)
	for {
		raw, name, err := r.Next(br)
		if err != nil {
			return
		}
		args := strings.Split(string(raw), "\r\n") // *n, $len, arg, $len, arg, ...
		s.mu.Lock()
		s.ran[name]++
		var reply string
		switch name {
		case "ping":
			reply = "+PONG\r\n"
		case "incr":
			s.kv[args[4]]++
			reply = ":" + strconv.Itoa(s.kv[args[4]]) + "\r\n"
		case "get":
			v := strconv.Itoa(s.kv[args[4]])
			reply = "$" + strconv.Itoa(len(v)) + "\r\n" + v + "\r\n"
		default:
			reply = "-ERR unknown\r\n"
		}
		s.mu.Unlock()
		if _, err := io.WriteString(c, reply); err != nil {
			return
		}
	}
}

func (s *kvServer) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ran[name]
}

// command sends one RESP command on c and reads its reply.
func command(c net.Conn, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, b.String()); err != nil {
		return "", err
	}
	v, err := retrytest.RESP().Reply(bufio.NewReader(c), "")
	return string(v), err
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newProxy(t *testing.T, cfg retrytest.ProxyConfig) *retrytest.Proxy {
	t.Helper()
	p, err := retrytest.NewProxy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestProxyRESP: by rule, a lost reply is applied at the server and the
// client sees a reset; a reset request is not applied; a withheld reply
// leaves the client waiting; the counts say which.
func TestProxyRESP(t *testing.T) {
	srv := startKV(t)
	only := func(name string, a retrytest.Action) retrytest.Rule {
		return func(m retrytest.Message) retrytest.Action {
			if m.Name == name {
				return a
			}
			return retrytest.Forward
		}
	}
	p := newProxy(t, retrytest.ProxyConfig{Target: srv.ln.Addr().String(), Protocol: retrytest.RESP, Rule: only("incr", retrytest.ResetReply)})
	c := dial(t, p.Addr())
	if v, err := command(c, "PING"); v != "+PONG\r\n" || err != nil {
		t.Fatalf("PING: %q, %v", v, err)
	}
	if v, err := command(c, "INCR", "k"); err == nil {
		t.Fatalf("INCR with a lost reply: %q; want an error", v)
	}
	if srv.count("incr") != 1 {
		t.Fatalf("server ran INCR %d times; want 1 (applied)", srv.count("incr"))
	}
	p.SetRule(only("incr", retrytest.ResetRequest))
	if _, err := command(dial(t, p.Addr()), "INCR", "k"); err == nil {
		t.Fatal("INCR reset before sending: want an error")
	}
	if srv.count("incr") != 1 {
		t.Fatalf("server ran INCR %d times; want still 1", srv.count("incr"))
	}
	p.SetRule(only("incr", retrytest.DropReply))
	c = dial(t, p.Addr())
	c.SetDeadline(time.Now().Add(200 * time.Millisecond))
	io.WriteString(c, "*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n")
	var ne net.Error
	if _, err := c.Read(make([]byte, 16)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("withheld reply: %v; want the client's timeout", err)
	}
	p.SetRule(nil)
	if v, err := command(dial(t, p.Addr()), "GET", "k"); v != "$1\r\n2\r\n" || err != nil {
		t.Fatalf("GET: %q, %v; want 2 (the lost and the withheld INCR applied)", v, err)
	}
	want := retrytest.ProxyCount{Messages: 3, ResetReplies: 1, DroppedReplies: 1, ResetRequests: 1}
	if got := p.CountName("incr"); got != want || got.Lost() != 2 {
		t.Fatalf("CountName(incr) = %+v; want %+v", got, want)
	}
	if got := p.Count(); got.Messages != 5 || got.Forwarded != 2 {
		t.Fatalf("Count() = %+v; want 5 messages, 2 forwarded (PING, GET)", got)
	}
}

// TestProxyAtRate: a seeded rate loses about its share of replies, the
// same for the same seed, and the server applied every one.
func TestProxyAtRate(t *testing.T) {
	srv := startKV(t)
	run := func(seed uint64) (lost int, pattern string) {
		rule, err := retrytest.AtRate(0.25, retrytest.ResetReply, seed, func(m retrytest.Message) bool { return m.Name == "incr" })
		if err != nil {
			t.Fatal(err)
		}
		p := newProxy(t, retrytest.ProxyConfig{Target: srv.ln.Addr().String(), Protocol: retrytest.RESP, Rule: rule})
		var b strings.Builder
		c := dial(t, p.Addr())
		for range 200 {
			if _, err := command(c, "INCR", "n"+strconv.FormatUint(seed, 10)); err != nil {
				b.WriteByte('x')
				c = dial(t, p.Addr())
				continue
			}
			b.WriteByte('.')
		}
		return p.Count().Lost(), b.String()
	}
	lost, pattern := run(1)
	again, same := run(1)
	// 200 draws at 0.25: 50 expected, standard deviation 6.1.
	if lost < 30 || lost > 70 || lost != strings.Count(pattern, "x") || again != lost || same != pattern {
		t.Fatalf("lost %d (%s), again %d", lost, pattern, again)
	}
	if v, _ := command(dial(t, srv.ln.Addr().String()), "GET", "n1"); v != "$3\r\n400\r\n" {
		t.Fatalf("server's count %q; want 400: every INCR applied, lost replies included", v)
	}
	if _, err := retrytest.AtRate(1.5, retrytest.ResetReply, 0, nil); err == nil || !strings.Contains(err.Error(), "1.5") {
		t.Fatalf("AtRate(1.5): %v", err)
	}
}

// TestProxyRawHTTP: without a Protocol, each chunk is a message; an HTTP
// request whose reply is lost was applied by the backend, and the client
// got a reset.
func TestProxyRawHTTP(t *testing.T) {
	b := retrytest.NewBackend()
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	var lose sync.Mutex
	losing := true
	p := newProxy(t, retrytest.ProxyConfig{Target: srv.Listener.Addr().String(), Rule: func(retrytest.Message) retrytest.Action {
		lose.Lock()
		defer lose.Unlock()
		if losing {
			losing = false
			return retrytest.ResetReply
		}
		return retrytest.Forward
	}})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	if _, err := client.Post("http://"+p.Addr()+"/pay", "text/plain", strings.NewReader("x")); err == nil {
		t.Fatal("POST with a lost reply: want an error")
	}
	resp, err := client.Get("http://" + p.Addr() + "/after")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := b.Total(); got != (retrytest.Count{Requests: 2, Applied: 2}) {
		t.Fatalf("backend %+v; want the lost POST and the GET applied", got)
	}
	if got := p.Count(); got.ResetReplies != 1 || got.Lost() != 1 {
		t.Fatalf("proxy %+v", got)
	}
}

// TestProxyRefusesBadConfig: only loopback targets; a bad port or a
// negative bound is an error naming the field.
func TestProxyRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  retrytest.ProxyConfig
		want string
	}{
		{retrytest.ProxyConfig{Target: "10.0.0.1:6379"}, "not a loopback address"},
		{retrytest.ProxyConfig{Target: "example.com:80"}, "not a loopback address"},
		{retrytest.ProxyConfig{Target: "[2001:db8::1]:80"}, "not a loopback address"},
		{retrytest.ProxyConfig{Target: "127.0.0.1"}, "missing port"},
		{retrytest.ProxyConfig{Target: "127.0.0.1:1", MaxConns: -1}, "MaxConns -1"},
	} {
		if p, err := retrytest.NewProxy(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			if p != nil {
				p.Close()
			}
			t.Errorf("NewProxy(%+v) = %v; want an error with %q", tc.cfg, err, tc.want)
		}
	}
	for _, target := range []string{"127.0.0.2:1", "[::1]:1", "localhost:1"} {
		p, err := retrytest.NewProxy(retrytest.ProxyConfig{Target: target})
		if err != nil {
			t.Errorf("NewProxy(%s): %v", target, err)
			continue
		}
		p.Close()
	}
}

// TestProxyBounds: connections past MaxConns are reset; SetRefuse makes
// dials fail, then the same address serves again.
func TestProxyBounds(t *testing.T) {
	srv := startKV(t)
	p := newProxy(t, retrytest.ProxyConfig{Target: srv.ln.Addr().String(), Protocol: retrytest.RESP, MaxConns: 1})
	c := dial(t, p.Addr())
	if _, err := command(c, "PING"); err != nil {
		t.Fatal(err)
	}
	// The reset may come while dialling or at the first read.
	if second, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		_, err = command(second, "PING")
		second.Close()
		if err == nil {
			t.Fatal("a second connection past MaxConns 1: want a reset")
		}
	}
	// Refusing, on a proxy of its own: the reset connections above leave
	// the proxy's bound asynchronously.
	p = newProxy(t, retrytest.ProxyConfig{Target: srv.ln.Addr().String(), Protocol: retrytest.RESP})
	if _, err := command(dial(t, p.Addr()), "PING"); err != nil {
		t.Fatal(err)
	}
	if err := p.SetRefuse(true); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("dial while refusing: want an error")
	}
	if err := p.SetRefuse(false); err != nil {
		t.Fatal(err)
	}
	if v, err := command(dial(t, p.Addr()), "PING"); v != "+PONG\r\n" || err != nil {
		t.Fatalf("after refusing: %q, %v", v, err)
	}
	p.Close()
	if err := p.SetRefuse(false); err == nil {
		t.Fatal("SetRefuse after Close: want an error")
	}
}

// TestProxyAfterReply: a Rule asked again after the reply loses only the
// replies whose content it chooses; CloseReply ends the connection with an
// end of stream, not a reset.
func TestProxyAfterReply(t *testing.T) {
	srv := startKV(t)
	var asked []string
	var mu sync.Mutex
	p := newProxy(t, retrytest.ProxyConfig{Target: srv.ln.Addr().String(), Protocol: retrytest.RESP,
		Rule: func(m retrytest.Message) retrytest.Action {
			mu.Lock()
			asked = append(asked, fmt.Sprintf("%s %q", m.Name, m.Reply))
			mu.Unlock()
			switch {
			case m.Name != "incr":
				return retrytest.Forward
			case m.Reply == nil:
				return retrytest.AfterReply
			case string(m.Reply) == ":2\r\n":
				return retrytest.CloseReply
			}
			return retrytest.ResetRequest // not a reply action: the reply is forwarded
		}})
	c := dial(t, p.Addr())
	if v, err := command(c, "INCR", "k"); v != ":1\r\n" || err != nil {
		t.Fatalf("first INCR: %q, %v", v, err)
	}
	if v, err := command(c, "INCR", "k"); !errors.Is(err, io.EOF) {
		t.Fatalf("second INCR: %q, %v; want an end of stream", v, err)
	}
	want := []string{`incr ""`, `incr ":1\r\n"`, `incr ""`, `incr ":2\r\n"`}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(asked, "|") != strings.Join(want, "|") {
		t.Fatalf("rule asked %q; want %q", asked, want)
	}
	if got := p.Count(); got != (retrytest.ProxyCount{Messages: 2, Forwarded: 1, ClosedReplies: 1}) || got.Lost() != 1 {
		t.Fatalf("count %+v", got)
	}
	if srv.count("incr") != 2 {
		t.Fatalf("server ran INCR %d times; want 2", srv.count("incr"))
	}
}

// TestProxyRawAfterReply: without a Framer, the server's first bytes after
// a chunk are its reply: lose the 201, pass the 503.
func TestProxyRawAfterReply(t *testing.T) {
	b := retrytest.NewBackend(retrytest.Reply{Status: http.StatusServiceUnavailable}, retrytest.Reply{Status: http.StatusCreated})
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	p := newProxy(t, retrytest.ProxyConfig{Target: srv.Listener.Addr().String(), Rule: func(m retrytest.Message) retrytest.Action {
		switch {
		case m.Reply == nil:
			return retrytest.AfterReply
		case strings.HasPrefix(string(m.Reply), "HTTP/1.1 201"):
			return retrytest.ResetReply
		}
		return retrytest.Forward
	}})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Post("http://"+p.Addr()+"/pay", "text/plain", strings.NewReader("x"))
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("first POST: %v, %v; want the 503", resp, err)
	}
	resp.Body.Close()
	if _, err := client.Post("http://"+p.Addr()+"/pay", "text/plain", strings.NewReader("x")); err == nil {
		t.Fatal("second POST: want its 201 lost")
	}
	if got := p.Count(); got.ResetReplies != 1 || got.Forwarded != 1 || b.Total() != (retrytest.Count{Requests: 2, Applied: 1}) {
		t.Fatalf("proxy %+v, backend %+v", got, b.Total())
	}
}
