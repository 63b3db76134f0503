// Package faultproxy is a TCP proxy on loopback for tests of Redis and
// Valkey clients: it forwards RESP commands to a server one at a time and,
// for a chosen fraction of them, breaks the client's connection at a chosen
// point, so that tests can tell a command that reached the server from one
// that did not.
//
// For each command read from a client connection the proxy decides, from a
// seeded generator, one of:
//   - pass: forward the command, read the server's whole reply, return it;
//   - reset after forwarding: forward the command, wait for the server's
//     reply (so the command was executed), then reset the client's
//     connection (TCP RST) instead of returning the reply;
//   - drop before forwarding: reset the client's connection without
//     forwarding the command (the server never sees it).
//
// From the client's side both faults look alike (its write succeeded, its
// read failed): a client cannot know whether the command was applied.
// [Proxy.SetRefuse] closes the listening socket so that new connections are
// refused, which gives the clean "never sent" failure of a dial error.
//
// The proxy parses RESP2 and RESP3 (and inline commands) and pairs each
// command with exactly one reply, so it must not be used with commands that
// answer more or less than once (SUBSCRIBE, MONITOR, CLIENT REPLY OFF).
// Pipelined commands are forwarded one at a time. It uses only the standard
// library.
package faultproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Config says which faults a Proxy injects. The zero Config injects none.
type Config struct {
	// ResetAfter is the fraction (0..1) of commands that are forwarded and
	// executed, after which the client's connection is reset before the
	// reply reaches it.
	ResetAfter float64
	// DropBefore is the fraction (0..1) of commands after which the
	// client's connection is reset without forwarding the command.
	DropBefore float64
	// Seed seeds the decisions, so a run is reproducible for a given order
	// of commands.
	Seed uint64
	// Match, when set, limits faults to commands for which it returns true;
	// name is the command name in lower case. Nil means every command,
	// including a client's connection handshake (HELLO, CLIENT SETINFO).
	Match func(name string) bool
}

// Proxy is a running fault proxy. It is safe for concurrent use.
type Proxy struct {
	target string
	addr   string

	mu     sync.Mutex
	cfg    Config
	rng    *rand.Rand
	ln     net.Listener          // nil while refusing
	conns  map[net.Conn]net.Conn // client -> server (nil until dialled)
	closed bool
	wg     sync.WaitGroup

	commands, resets, drops atomic.Int64
	counts                  sync.Map // name -> *[3]atomic.Int64 (passed, reset, dropped)
}

// Start starts a proxy on a free 127.0.0.1 port in front of target
// ("host:port") and closes it when tb ends.
func Start(tb testing.TB, target string, cfg Config) *Proxy {
	tb.Helper()
	p, err := New(target, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}

// New starts a proxy on a free 127.0.0.1 port in front of target. Close
// stops it.
func New(target string, cfg Config) (*Proxy, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), cfg: cfg,
		rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), conns: map[net.Conn]net.Conn{}}
	p.serve(ln)
	return p, nil
}

func (c Config) check() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"ResetAfter", c.ResetAfter}, {"DropBefore", c.DropBefore}} {
		if !(f.v >= 0 && f.v <= 1) {
			return fmt.Errorf("faultproxy: %s %v outside [0, 1]", f.name, f.v)
		}
	}
	if c.ResetAfter+c.DropBefore > 1 {
		return fmt.Errorf("faultproxy: ResetAfter + DropBefore = %v > 1", c.ResetAfter+c.DropBefore)
	}
	return nil
}

// Addr returns the proxy's "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.addr }

// SetConfig replaces the fault configuration for the commands that follow.
func (p *Proxy) SetConfig(cfg Config) error {
	if err := cfg.check(); err != nil {
		return err
	}
	p.mu.Lock()
	p.cfg = cfg
	p.mu.Unlock()
	return nil
}

// SetRefuse(true) closes the listening socket, so that new connections are
// refused (a dial error: nothing was sent) and resets every open client
// connection; SetRefuse(false) listens again on the same port.
func (p *Proxy) SetRefuse(refuse bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("faultproxy: closed")
	}
	if refuse {
		if p.ln != nil {
			p.ln.Close()
			p.ln = nil
		}
		p.resetAll()
		return nil
	}
	if p.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("faultproxy: listen again on %s: %w", p.addr, err)
	}
	p.mu.Unlock()
	p.serve(ln)
	p.mu.Lock()
	return nil
}

// Commands returns how many commands the proxy has read from clients.
func (p *Proxy) Commands() int64 { return p.commands.Load() }

// Resets returns how many commands were forwarded and then had their
// client connection reset before the reply.
func (p *Proxy) Resets() int64 { return p.resets.Load() }

// Drops returns how many commands were dropped before forwarding.
func (p *Proxy) Drops() int64 { return p.drops.Load() }

// Counts returns, for one command name (lower case), how many were passed,
// reset after forwarding, and dropped before forwarding.
func (p *Proxy) Counts(name string) (passed, resetAfter, dropped int64) {
	v, ok := p.counts.Load(name)
	if !ok {
		return 0, 0, 0
	}
	c := v.(*[3]atomic.Int64)
	return c[0].Load(), c[1].Load(), c[2].Load()
}

// Close stops listening, resets every connection and waits for the
// proxy's goroutines to end.
func (p *Proxy) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		if p.ln != nil {
			p.ln.Close()
			p.ln = nil
		}
		p.resetAll()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.closed || p.ln != ln {
				p.mu.Unlock()
				reset(c)
				continue
			}
			p.conns[c] = nil
			p.wg.Add(1)
			p.mu.Unlock()
			go p.handle(c)
		}
	}()
}

// resetAll resets every open connection. p.mu must be held.
func (p *Proxy) resetAll() {
	for c, s := range p.conns {
		reset(c)
		if s != nil {
			s.Close()
		}
	}
}

func (p *Proxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

const (
	pass = iota
	resetAfter
	dropBefore
)

func (p *Proxy) decide(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg.Match != nil && !p.cfg.Match(name) {
		return pass
	}
	if p.cfg.ResetAfter == 0 && p.cfg.DropBefore == 0 {
		return pass
	}
	x := p.rng.Float64()
	switch {
	case x < p.cfg.ResetAfter:
		return resetAfter
	case x < p.cfg.ResetAfter+p.cfg.DropBefore:
		return dropBefore
	}
	return pass
}

func (p *Proxy) count(name string, what int) {
	v, ok := p.counts.Load(name)
	if !ok {
		v, _ = p.counts.LoadOrStore(name, new([3]atomic.Int64))
	}
	v.(*[3]atomic.Int64)[what].Add(1)
}

func (p *Proxy) handle(client net.Conn) {
	defer p.wg.Done()
	defer p.forget(client)
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		reset(client)
		return
	}
	defer server.Close()
	// Register the server side so that Close and SetRefuse also end a read
	// blocked on the server.
	p.mu.Lock()
	if _, ok := p.conns[client]; !ok {
		p.mu.Unlock()
		reset(client)
		return
	}
	p.conns[client] = server
	p.mu.Unlock()
	cr, sr := bufio.NewReader(client), bufio.NewReader(server)
	for {
		raw, name, err := readCommand(cr)
		if err != nil {
			return
		}
		p.commands.Add(1)
		what := p.decide(name)
		p.count(name, what)
		if what == dropBefore {
			p.drops.Add(1)
			reset(client)
			return
		}
		if _, err := server.Write(raw); err != nil {
			reset(client)
			return
		}
		reply, err := readValue(sr, nil)
		if err != nil {
			reset(client)
			return
		}
		if what == resetAfter {
			p.resets.Add(1)
			reset(client)
			return
		}
		if _, err := client.Write(reply); err != nil {
			return
		}
	}
}

// reset closes c with a TCP RST rather than an orderly FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// maxBulk bounds one bulk string, so that bad input cannot make the proxy
// allocate without limit.
const maxBulk = 512 << 20

// readCommand reads one command (a RESP array of bulk strings, or an
// inline command line) and returns its raw bytes and its lower-case name.
func readCommand(r *bufio.Reader) (raw []byte, name string, err error) {
	b, err := r.Peek(1)
	if err != nil {
		return nil, "", err
	}
	if b[0] != '*' {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return nil, "", err
		}
		f := strings.Fields(string(line))
		if len(f) > 0 {
			name = strings.ToLower(f[0])
		}
		return line, name, nil
	}
	var first []byte
	raw, err = readValueFirst(r, nil, &first)
	if err != nil {
		return nil, "", err
	}
	return raw, strings.ToLower(string(first)), nil
}

func readValue(r *bufio.Reader, dst []byte) ([]byte, error) {
	return readValueFirst(r, dst, nil)
}

// readValueFirst appends one whole RESP2/RESP3 value to dst. When first is
// not nil it receives the first bulk string inside the value (a command's
// name).
func readValueFirst(r *bufio.Reader, dst []byte, first *[]byte) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return dst, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return dst, fmt.Errorf("faultproxy: bad RESP line %q", line)
	}
	// line is a view into r's buffer, valid only until r's next read: keep
	// the type byte, since reading the elements below may overwrite it.
	dst = append(dst, line...)
	typ, body := line[0], line[1:len(line)-2]
	switch typ {
	case '+', '-', ':', '_', '#', ',', '(':
		return dst, nil
	case '$', '!', '=':
		n, err := strconv.Atoi(string(body))
		if err != nil || n > maxBulk {
			return dst, fmt.Errorf("faultproxy: bad length %q", body)
		}
		if n < 0 {
			return dst, nil
		}
		start := len(dst)
		// Grow with the data actually read, not with the declared length.
		for need := n + 2; need > 0; {
			chunk := min(need, 32<<10)
			at := len(dst)
			dst = append(dst, make([]byte, chunk)...)
			if _, err := io.ReadFull(r, dst[at:]); err != nil {
				return dst, err
			}
			need -= chunk
		}
		if first != nil && *first == nil {
			*first = append([]byte(nil), dst[start:start+n]...)
		}
		return dst, nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(string(body))
		if err != nil || n > maxBulk {
			return dst, fmt.Errorf("faultproxy: bad count %q", body)
		}
		if typ == '%' || typ == '|' {
			n *= 2
		}
		for range max(n, 0) {
			if dst, err = readValueFirst(r, dst, first); err != nil {
				return dst, err
			}
		}
		if typ == '|' { // an attribute precedes the real reply
			return readValueFirst(r, dst, first)
		}
		return dst, nil
	}
	return dst, fmt.Errorf("faultproxy: unknown RESP type %q", typ)
}
