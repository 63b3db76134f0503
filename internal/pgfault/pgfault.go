// Package pgfault is a TCP proxy on loopback for tests of PostgreSQL
// clients that loses the replies of committed transactions: it forwards
// the PostgreSQL wire protocol (version 3) both ways and, for a chosen
// share of the COMMITs the server applied, resets the client's connection
// (or closes it: Config.EOF) instead of passing the server's answer on.
// The client then cannot know
// whether its transaction committed; the test can, by the proxy's counts.
//
// The proxy reads the server's CommandComplete messages: a tag "COMMIT" is
// a transaction the server committed. Config.Tag chooses another command
// (an autocommit INSERT). It counts the client sessions it
// saw (startup messages), leaving out the extra connections that a client
// opens to send a CancelRequest, and the transactions begun (a simple
// query BEGIN or START TRANSACTION). It does not negotiate TLS: clients
// must connect with sslmode=disable. Standard library only.
package pgfault

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Config says which faults a Proxy injects. The zero Config injects none.
type Config struct {
	// Lose is the share (0..1) of the statements with Tag that the server
	// completed whose reply is lost: the client's connection is reset
	// (TCP RST) before the server's CommandComplete reaches it. The choice
	// is deterministic: of the first n such statements, floor(n*Lose)
	// are lost, evenly spread.
	Lose float64
	// Tag is the command tag whose replies may be lost, matched as a
	// prefix of the CommandComplete tag ("INSERT" matches "INSERT 0 1").
	// Empty means "COMMIT": a transaction the server committed (a COMMIT
	// of a failed transaction is answered "ROLLBACK" and is never lost).
	Tag string
	// EOF closes the client's connection in the ordinary way, so that it
	// reads an end of stream, instead of resetting it. Drivers tell the
	// two apart: lib/pq turns an end of stream into driver.ErrBadConn,
	// on which database/sql sends the statement again.
	EOF bool
}

// Proxy is a running proxy. It is safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	cfg    Config

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup

	applied  int64 // guarded by mu: the loss decision reads and bumps it
	lost     atomic.Int64
	sessions atomic.Int64
	cancels  atomic.Int64
	begins   atomic.Int64
}

// Start starts a proxy on a free 127.0.0.1 port in front of target
// ("host:port") and closes it when tb ends.
func Start(tb testing.TB, target string, cfg Config) *Proxy {
	tb.Helper()
	if !(cfg.Lose >= 0 && cfg.Lose <= 1) {
		tb.Fatalf("pgfault: Lose %v outside [0, 1]", cfg.Lose)
	}
	if cfg.Tag == "" {
		cfg.Tag = "COMMIT"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{target: target, ln: ln, cfg: cfg, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	tb.Cleanup(p.Close)
	return p
}

// Addr returns the proxy's "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Applied returns how many statements with the Config's Tag the server
// completed through the proxy (COMMITs: transactions committed), lost
// replies included.
func (p *Proxy) Applied() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied
}

// Lost returns how many of those had their reply lost.
func (p *Proxy) Lost() int64 { return p.lost.Load() }

// Sessions returns how many client sessions started (startup messages),
// without the connections that only carried a CancelRequest.
func (p *Proxy) Sessions() int64 { return p.sessions.Load() }

// Cancels returns how many CancelRequest connections passed.
func (p *Proxy) Cancels() int64 { return p.cancels.Load() }

// Begins returns how many transactions were begun (BEGIN or START
// TRANSACTION sent as a simple query): the transaction attempts.
func (p *Proxy) Begins() int64 { return p.begins.Load() }

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.handle(c)
		}()
	}
}

// Protocol codes of the untyped first messages.
const (
	codeCancel = 80877102
	codeSSL    = 80877103
	codeGSSENC = 80877104
)

// maxMessage bounds one message's length, against a garbled stream.
const maxMessage = 1 << 30

func (p *Proxy) handle(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	cr := bufio.NewReader(client)
	sr := bufio.NewReader(server)
	// The untyped first messages: SSL and GSS encryption requests, which
	// the server answers with one byte, then a startup message or a
	// CancelRequest.
	for {
		body, err := readUntyped(cr)
		if err != nil {
			return
		}
		if err := writeUntyped(server, body); err != nil {
			return
		}
		code := binary.BigEndian.Uint32(body)
		if code == codeSSL || code == codeGSSENC {
			b, err := sr.ReadByte()
			if err != nil {
				return
			}
			if b != 'N' {
				return // encryption is not supported
			}
			if _, err := client.Write([]byte{b}); err != nil {
				return
			}
			continue
		}
		if code == codeCancel {
			p.cancels.Add(1)
			io.Copy(client, sr) // the server answers by closing
			return
		}
		p.sessions.Add(1)
		break
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.clientToServer(cr, server)
		server.Close()
	}()
	p.serverToClient(sr, client)
	client.Close()
	server.Close()
	<-done
}

func (p *Proxy) clientToServer(cr *bufio.Reader, server net.Conn) {
	for {
		typ, body, err := readTyped(cr)
		if err != nil {
			return
		}
		if typ == 'Q' && begins(body) {
			p.begins.Add(1)
		}
		if err := writeTyped(server, typ, body); err != nil {
			return
		}
	}
}

func (p *Proxy) serverToClient(sr *bufio.Reader, client net.Conn) {
	for {
		typ, body, err := readTyped(sr)
		if err != nil {
			return
		}
		if typ == 'C' && p.matches(body) && p.loseNext() {
			p.lost.Add(1)
			if tc, ok := client.(*net.TCPConn); ok && !p.cfg.EOF {
				tc.SetLinger(0) // close with a reset
			}
			return
		}
		if err := writeTyped(client, typ, body); err != nil {
			return
		}
	}
}

// matches reports whether the CommandComplete body (a NUL-terminated tag)
// is one of the Config's Tag: the tag itself or the tag, a space, more.
func (p *Proxy) matches(body []byte) bool {
	tag := strings.TrimRight(string(body), "\x00")
	rest, ok := strings.CutPrefix(tag, p.cfg.Tag)
	return ok && (rest == "" || rest[0] == ' ')
}

// loseNext counts one applied statement and says whether its reply is lost.
func (p *Proxy) loseNext() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.applied
	p.applied++
	f := p.cfg.Lose
	return int64(float64(n+1)*f) > int64(float64(n)*f)
}

// begins reports whether the simple query q (NUL-terminated) begins a
// transaction.
func begins(q []byte) bool {
	s := strings.ToLower(strings.TrimSpace(strings.TrimRight(string(q), "\x00")))
	return strings.HasPrefix(s, "begin") || strings.HasPrefix(s, "start transaction")
}

func readUntyped(r *bufio.Reader) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n < 8 || n > maxMessage {
		return nil, fmt.Errorf("pgfault: first message of %d bytes", n)
	}
	body := make([]byte, n-4)
	_, err := io.ReadFull(r, body)
	return body, err
}

func writeUntyped(w io.Writer, body []byte) error {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(4+len(body)))
	_, err := w.Write(append(b, body...))
	return err
}

func readTyped(r *bufio.Reader) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n < 4 || n > maxMessage {
		return 0, nil, errors.New("pgfault: bad message length")
	}
	body := make([]byte, n-4)
	_, err := io.ReadFull(r, body)
	return h[0], body, err
}

func writeTyped(w io.Writer, typ byte, body []byte) error {
	b := make([]byte, 5, 5+len(body))
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:], uint32(4+len(body)))
	_, err := w.Write(append(b, body...))
	return err
}
