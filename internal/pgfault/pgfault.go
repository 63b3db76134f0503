// Package pgfault is a TCP proxy on loopback for tests of PostgreSQL
// clients that loses the replies of committed transactions. It is a
// [retrytest.Proxy] with a PostgreSQL Framer (protocol version 3) and a
// Rule: for a chosen share of the COMMITs the server applied, it resets
// the client's connection (or closes it: Config.EOF) instead of passing
// the server's answer on. The client then cannot know whether its
// transaction committed; the test can, by the proxy's counts.
//
// The Rule reads the server's CommandComplete messages: a tag "COMMIT" is
// a transaction the server committed. Config.Tag chooses another command
// (an autocommit INSERT). The proxy counts the client sessions it saw
// (startup messages), leaving out the extra connections that a client
// opens to send a CancelRequest, and the transactions begun (a simple
// query BEGIN or START TRANSACTION). It does not negotiate TLS: clients
// must connect with sslmode=disable. Standard library only.
package pgfault

import (
	"encoding/binary"
	"strings"
	"sync"
	"testing"

	"github.com/retrykit/retry/retrytest"
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

// maxConns bounds the connections served at once: above any pool a test
// opens.
const maxConns = 1024

// Proxy is a running proxy: a retrytest.Proxy with the Postgres Framer,
// whose counts by message name ("(startup)", "(cancel)", "BEGIN") give
// Sessions, Cancels and Begins. It is safe for concurrent use.
type Proxy struct {
	p   *retrytest.Proxy
	cfg Config

	mu      sync.Mutex
	applied int64 // the loss decision reads and bumps it
}

// Start starts a proxy on a free 127.0.0.1 port in front of target
// ("host:port", a loopback address) and closes it when tb ends.
func Start(tb testing.TB, target string, cfg Config) *Proxy {
	tb.Helper()
	if !(cfg.Lose >= 0 && cfg.Lose <= 1) {
		tb.Fatalf("pgfault: Lose %v outside [0, 1]", cfg.Lose)
	}
	if cfg.Tag == "" {
		cfg.Tag = "COMMIT"
	}
	p := &Proxy{cfg: cfg}
	rp, err := retrytest.NewProxy(retrytest.ProxyConfig{
		Target: target, Protocol: retrytest.Postgres, Rule: p.rule, MaxConns: maxConns,
	})
	if err != nil {
		tb.Fatal(err)
	}
	p.p = rp
	tb.Cleanup(p.Close)
	return p
}

// Addr returns the proxy's "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.p.Addr() }

// Applied returns how many statements with the Config's Tag the server
// completed through the proxy (COMMITs: transactions committed), lost
// replies included.
func (p *Proxy) Applied() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied
}

// Lost returns how many of those had their reply lost.
func (p *Proxy) Lost() int64 { return int64(p.p.Count().Lost()) }

// Sessions returns how many client sessions started (startup messages),
// without the connections that only carried a CancelRequest.
func (p *Proxy) Sessions() int64 { return int64(p.p.CountName("(startup)").Messages) }

// Cancels returns how many CancelRequest connections passed.
func (p *Proxy) Cancels() int64 { return int64(p.p.CountName("(cancel)").Messages) }

// Begins returns how many transactions were begun (BEGIN or START
// TRANSACTION sent as a simple query): the transaction attempts.
func (p *Proxy) Begins() int64 {
	return int64(p.p.CountName("BEGIN").Messages + p.p.CountName("START").Messages)
}

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() { p.p.Close() }

// rule asks for the reply of every message, and loses it when it holds a
// CommandComplete with the Config's Tag that loseNext picks.
func (p *Proxy) rule(m retrytest.Message) retrytest.Action {
	if m.Reply == nil {
		return retrytest.AfterReply
	}
	for b := m.Reply; len(b) >= 5; {
		n := int(binary.BigEndian.Uint32(b[1:5]))
		if n < 4 || 1+n > len(b) {
			break
		}
		if b[0] == 'C' && p.matches(b[5:1+n]) && p.loseNext() {
			if p.cfg.EOF {
				return retrytest.CloseReply
			}
			return retrytest.ResetReply
		}
		b = b[1+n:]
	}
	return retrytest.Forward
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
