// Package faultproxy is the Redis and Valkey tests' lost-reply proxy: a
// [retrytest.Proxy] speaking RESP, with its faults drawn at seeded rates.
// For each command read from a client connection it decides one of:
//   - pass: forward the command, read the server's whole reply, return it;
//   - reset after forwarding: forward the command, wait for the server's
//     reply (so the command was executed), then reset the client's
//     connection (TCP RST) instead of returning the reply;
//   - drop before forwarding: reset the client's connection without
//     forwarding the command (the server never sees it).
//
// From the client's side both faults look alike (its write succeeded, its
// read failed): a client cannot know whether the command was applied.
// [Proxy.SetRefuse] closes the listening socket so that new connections
// are refused, which gives the clean "never sent" failure of a dial error.
// See [retrytest.RESP] for the commands it cannot pair with one reply.
package faultproxy

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/retrykit/retry/retrytest"
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
	*retrytest.Proxy
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
	rule, err := cfg.rule()
	if err != nil {
		return nil, err
	}
	px, err := retrytest.NewProxy(retrytest.ProxyConfig{Target: target, Protocol: retrytest.RESP, Rule: rule})
	if err != nil {
		return nil, err
	}
	return &Proxy{px}, nil
}

// rule checks c and returns its decisions as a retrytest.Rule.
func (c Config) rule() (retrytest.Rule, error) {
	for _, f := range []struct {
		name string
		v    float64
	}{{"ResetAfter", c.ResetAfter}, {"DropBefore", c.DropBefore}} {
		if !(f.v >= 0 && f.v <= 1) {
			return nil, fmt.Errorf("faultproxy: %s %v outside [0, 1]", f.name, f.v)
		}
	}
	if c.ResetAfter+c.DropBefore > 1 {
		return nil, fmt.Errorf("faultproxy: ResetAfter + DropBefore = %v > 1", c.ResetAfter+c.DropBefore)
	}
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(c.Seed, c.Seed^0x9e3779b97f4a7c15))
	return func(m retrytest.Message) retrytest.Action {
		if c.Match != nil && !c.Match(m.Name) || c.ResetAfter == 0 && c.DropBefore == 0 {
			return retrytest.Forward
		}
		mu.Lock()
		x := rng.Float64()
		mu.Unlock()
		switch {
		case x < c.ResetAfter:
			return retrytest.ResetReply
		case x < c.ResetAfter+c.DropBefore:
			return retrytest.ResetRequest
		}
		return retrytest.Forward
	}, nil
}

// SetConfig replaces the fault configuration for the commands that follow.
func (p *Proxy) SetConfig(cfg Config) error {
	rule, err := cfg.rule()
	if err != nil {
		return err
	}
	p.SetRule(rule)
	return nil
}

// Commands returns how many commands the proxy has read from clients.
func (p *Proxy) Commands() int64 { return int64(p.Count().Messages) }

// Resets returns how many commands were forwarded and then had their
// client connection reset before the reply.
func (p *Proxy) Resets() int64 { return int64(p.Count().ResetReplies) }

// Drops returns how many commands were dropped before forwarding.
func (p *Proxy) Drops() int64 { return int64(p.Count().ResetRequests) }

// Counts returns, for one command name (lower case), how many were passed,
// reset after forwarding, and dropped before forwarding.
func (p *Proxy) Counts(name string) (passed, resetAfter, dropped int64) {
	c := p.CountName(name)
	return int64(c.Forwarded), int64(c.ResetReplies), int64(c.ResetRequests)
}
