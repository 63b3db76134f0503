package retrytest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/retrykit/retry/internal/netreset"
)

// DefaultMaxConns is the most client connections a [Proxy] serves at once
// when ProxyConfig.MaxConns is zero.
const DefaultMaxConns = 64

// Action is what a [Proxy] does with one message from a client.
type Action uint8

const (
	// Forward sends the message to the server and its reply to the client.
	Forward Action = iota
	// ResetReply sends the message, lets the server answer (so it was
	// applied) and resets the client's connection (TCP RST) instead of
	// passing the reply on: a lost reply.
	ResetReply
	// DropReply sends the message, lets the server answer, and withholds
	// the reply; the connection then stays open and silent until the
	// client closes it (the client waits until its own timeout).
	DropReply
	// ResetRequest resets the client's connection without sending the
	// message: the server never sees it, though the client's write may
	// have succeeded.
	ResetRequest
	// CloseReply is ResetReply with an orderly close (FIN) instead of a
	// reset: the client reads an end of stream where the reply should be.
	// Some clients tell the two apart (lib/pq takes an end of stream for a
	// connection that was never used, and database/sql sends again).
	CloseReply
	// AfterReply sends the message and asks the Rule again once the
	// server's reply is read, with Message.Reply set, so that the reply's
	// content can decide (lose a COMMIT's reply only when the server
	// answered COMMIT). The second answer is Forward, ResetReply,
	// DropReply or CloseReply; any other forwards the reply.
	AfterReply
)

// Message is one message a [Proxy] read from a client, as a [Rule] sees it.
type Message struct {
	Conn int    // the client connection, numbered from 1 in the order accepted
	Seq  int    // the message's rank on its connection, from 1
	Name string // the name the Framer gave it (a command name); "" for raw chunks
	Data []byte // its bytes, valid only during the Rule's call
	// Reply is the server's reply, when the Rule is asked again after an
	// AfterReply (raw chunks: the server's first bytes after the message);
	// nil on the first ask. Valid only during the Rule's call.
	Reply []byte
}

// Rule decides what a [Proxy] does with each message. It is called on the
// connection's goroutine, one message at a time per connection, and from
// several connections at once: it must be safe for concurrent use.
type Rule func(Message) Action

// AtRate returns a Rule that takes action on a share rate of the messages
// for which match returns true (nil matches every message), drawn from a
// generator seeded with seed, and forwards the others. The same sequence
// of matching messages gets the same actions. A rate outside [0, 1] is an
// error.
func AtRate(rate float64, action Action, seed uint64, match func(Message) bool) (Rule, error) {
	if !(rate >= 0 && rate <= 1) {
		return nil, fmt.Errorf("retrytest: AtRate rate %v is outside [0, 1]", rate)
	}
	var mu sync.Mutex
	rng := newRand(seed)
	return func(m Message) Action {
		if match != nil && !match(m) {
			return Forward
		}
		mu.Lock()
		x := rng.Float64()
		mu.Unlock()
		if x < rate {
			return action
		}
		return Forward
	}, nil
}

// A Framer splits one proxied connection into messages, so that a [Proxy]
// can pair each request with its reply: it tells where a client's message
// ends and where the server's answer to it ends. Each connection gets its
// own Framer from the [Protocol], so it may keep state (a handshake, a
// transaction). [RESP] and [Postgres] are two.
type Framer interface {
	// Next reads the client's next message whole and returns its bytes and
	// a name for rules. An error ends the connection.
	Next(client *bufio.Reader) (msg []byte, name string, err error)
	// Reply reads from the server the whole answer to the message just
	// read (named name) and returns its bytes; nil when that message has
	// no answer of its own (the proxy then forwards the next message). An
	// error ends the connection.
	Reply(server *bufio.Reader, name string) ([]byte, error)
}

// Protocol returns the Framer of one new connection.
type Protocol func() Framer

// ProxyConfig configures a [Proxy].
type ProxyConfig struct {
	// Target is the server's "host:port". It must be a loopback address
	// (127.0.0.0/8, ::1 or localhost): the proxy is for tests.
	Target string
	// Protocol frames each connection into messages and replies. Nil means
	// raw chunks: each read from the client is a message, and the first
	// bytes the server sends after it count as its reply, which fits
	// protocols where the client speaks and then waits (HTTP/1.1, Redis
	// without pipelining), not those where the server speaks unprompted
	// (HTTP/2 and gRPC: use a Framer, or a Rule that counts on Seq).
	Protocol Protocol
	// Rule decides per message. Nil forwards every message. Replace it
	// while running with SetRule.
	Rule Rule
	// MaxConns bounds the client connections served at once; more are
	// reset when accepted. Zero means DefaultMaxConns; negative is invalid.
	MaxConns int
}

// ProxyCount is what a [Proxy] did with the messages of one name, or of all.
type ProxyCount struct {
	Messages       int // messages read from clients
	Forwarded      int // sent on with their reply (Forward)
	ResetReplies   int // answered by the server, then the client's connection reset
	ClosedReplies  int // answered by the server, then the client's connection closed
	DroppedReplies int // answered by the server, reply withheld
	ResetRequests  int // not sent: the client's connection reset
}

// Lost returns how many messages the server answered (so applied) while the
// client never got the reply: ResetReplies + ClosedReplies + DroppedReplies.
func (c ProxyCount) Lost() int { return c.ResetReplies + c.ClosedReplies + c.DroppedReplies }

// Proxy is a lost-reply TCP proxy on 127.0.0.1 in front of a real server
// (Redis, PostgreSQL, gRPC, HTTP) for tests: it forwards each message, and
// as its Rule says lets the server apply it and resets or withholds the
// reply, or resets the connection before sending it, counting what it
// did. Get one with [NewProxy] and Close it when done (t.Cleanup); it is
// safe for concurrent use. It stays outside synctest bubbles: it uses the
// network.
type Proxy struct {
	target   string
	addr     string
	protocol Protocol
	maxConns int

	mu       sync.Mutex
	rule     Rule
	ln       net.Listener          // nil while refusing
	conns    map[net.Conn]net.Conn // client -> server (nil until dialled)
	accepted int
	closed   bool
	total    ProxyCount
	byName   map[string]*ProxyCount
	wg       sync.WaitGroup
}

// NewProxy starts a proxy on a free 127.0.0.1 port in front of cfg.Target,
// or returns an error naming what is wrong with cfg.
func NewProxy(cfg ProxyConfig) (*Proxy, error) {
	host, _, err := net.SplitHostPort(cfg.Target)
	if err != nil {
		return nil, fmt.Errorf("retrytest: ProxyConfig.Target %q: %w", cfg.Target, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("retrytest: ProxyConfig.Target %q is not a loopback address", cfg.Target)
	}
	if cfg.MaxConns < 0 {
		return nil, fmt.Errorf("retrytest: ProxyConfig.MaxConns %d is negative", cfg.MaxConns)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("retrytest: proxy: %w", err)
	}
	p := &Proxy{target: cfg.Target, addr: ln.Addr().String(), protocol: cfg.Protocol, maxConns: cfg.MaxConns,
		rule: cfg.Rule, conns: map[net.Conn]net.Conn{}, byName: map[string]*ProxyCount{}}
	if p.maxConns == 0 {
		p.maxConns = DefaultMaxConns
	}
	p.serve(ln)
	return p, nil
}

// Addr returns the proxy's "127.0.0.1:port", to dial instead of the target.
func (p *Proxy) Addr() string { return p.addr }

// SetRule replaces the rule for the messages that follow; nil forwards all.
func (p *Proxy) SetRule(r Rule) {
	p.mu.Lock()
	p.rule = r
	p.mu.Unlock()
}

// SetRefuse(true) closes the listening socket, so that new connections are
// refused (a dial error: nothing was sent), and resets every open client
// connection; SetRefuse(false) listens again on the same port.
func (p *Proxy) SetRefuse(refuse bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("retrytest: proxy closed")
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
		return fmt.Errorf("retrytest: proxy: listen again on %s: %w", p.addr, err)
	}
	p.mu.Unlock()
	p.serve(ln)
	p.mu.Lock()
	return nil
}

// Count returns what the proxy did with every message so far.
func (p *Proxy) Count() ProxyCount {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// CountName returns what the proxy did with the messages named name (for
// RESP, a command name in lower case; for Postgres, see its names; "" for
// raw chunks).
func (p *Proxy) CountName(name string) ProxyCount {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.byName[name]; c != nil {
		return *c
	}
	return ProxyCount{}
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
			if p.closed || p.ln != ln || len(p.conns) >= p.maxConns {
				p.mu.Unlock()
				netreset.Conn(c)
				continue
			}
			p.accepted++
			n := p.accepted
			p.conns[c] = nil
			p.wg.Add(1)
			p.mu.Unlock()
			go p.handle(c, n)
		}
	}()
}

// resetAll resets every open connection. p.mu must be held.
func (p *Proxy) resetAll() {
	for c, s := range p.conns {
		netreset.Conn(c)
		if s != nil {
			s.Close()
		}
	}
}

// decide counts message m and returns the rule's action for it.
func (p *Proxy) decide(m Message) Action {
	p.mu.Lock()
	p.tally(m.Name, func(c *ProxyCount) { c.Messages++ })
	p.mu.Unlock()
	a := p.ask(m)
	if a == ResetRequest {
		p.mu.Lock()
		p.tally(m.Name, func(c *ProxyCount) { c.ResetRequests++ })
		p.mu.Unlock()
	}
	return a
}

// ask returns the rule's action for m: on the first ask any action, on the
// second (m.Reply set) only Forward or one that loses the reply.
func (p *Proxy) ask(m Message) Action {
	p.mu.Lock()
	rule := p.rule
	p.mu.Unlock()
	a := Forward
	if rule != nil {
		a = rule(m)
	}
	if m.Reply != nil && !losesReply(a) || a > AfterReply {
		a = Forward
	}
	if a == Forward {
		p.mu.Lock()
		p.tally(m.Name, func(c *ProxyCount) { c.Forwarded++ })
		p.mu.Unlock()
	}
	return a
}

func losesReply(a Action) bool { return a == ResetReply || a == CloseReply || a == DropReply }

// lose counts a reply of a message named name that the server sent and
// the client will not get, and ends client's connection as a says.
// p.mu must not be held.
func (p *Proxy) lose(client net.Conn, name string, a Action) {
	p.mu.Lock()
	p.tally(name, func(c *ProxyCount) {
		switch a {
		case ResetReply:
			c.ResetReplies++
		case CloseReply:
			c.ClosedReplies++
		default:
			c.DroppedReplies++
		}
	})
	p.mu.Unlock()
	switch a {
	case ResetReply:
		netreset.Conn(client)
	case CloseReply:
		client.Close()
	}
}

// tally applies f to the total and to name's count. p.mu must be held.
func (p *Proxy) tally(name string, f func(*ProxyCount)) {
	f(&p.total)
	c := p.byName[name]
	if c == nil {
		c = &ProxyCount{}
		p.byName[name] = c
	}
	f(c)
}

func (p *Proxy) handle(client net.Conn, n int) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, client)
		p.mu.Unlock()
	}()
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		netreset.Conn(client)
		return
	}
	defer server.Close()
	// Register the server side so that Close and SetRefuse also end a read
	// blocked on the server.
	p.mu.Lock()
	if _, ok := p.conns[client]; !ok {
		p.mu.Unlock()
		netreset.Conn(client)
		return
	}
	p.conns[client] = server
	p.mu.Unlock()
	if p.protocol == nil {
		p.raw(client, server, n)
	} else {
		p.framed(client, server, n, p.protocol())
	}
}

// framed serves one connection a message at a time through f.
func (p *Proxy) framed(client, server net.Conn, conn int, f Framer) {
	cr, sr := bufio.NewReader(client), bufio.NewReader(server)
	for seq := 1; ; seq++ {
		msg, name, err := f.Next(cr)
		if err != nil {
			return
		}
		a := p.decide(Message{Conn: conn, Seq: seq, Name: name, Data: msg})
		if a == ResetRequest {
			netreset.Conn(client)
			return
		}
		if _, err := server.Write(msg); err != nil {
			netreset.Conn(client)
			return
		}
		reply, err := f.Reply(sr, name)
		if err != nil {
			netreset.Conn(client)
			return
		}
		if a == AfterReply {
			a = p.ask(Message{Conn: conn, Seq: seq, Name: name, Data: msg, Reply: nonNil(reply)})
		}
		if losesReply(a) {
			p.lose(client, name, a)
			if a == DropReply {
				silent(client)
			}
			return
		}
		if len(reply) > 0 {
			if _, err := client.Write(reply); err != nil {
				return
			}
		}
	}
}

// raw serves one connection chunk by chunk: each read from the client is a
// message, and the server's next bytes after it its reply.
func (p *Proxy) raw(client, server net.Conn, conn int) {
	var (
		mu      sync.Mutex
		pending Action  // what to do with the server's next bytes
		asked   Message // the message of a pending AfterReply
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 32<<10)
		dropped := false
		for {
			n, err := server.Read(buf)
			if n > 0 && !dropped {
				mu.Lock()
				a, m := pending, asked
				pending = Forward
				mu.Unlock()
				if a == AfterReply {
					m.Reply = buf[:n]
					a = p.ask(m)
				}
				if losesReply(a) {
					p.lose(client, "", a)
					if a != DropReply {
						return
					}
					dropped = true // swallow the rest
					continue
				}
				if _, err := client.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				client.Close()
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for seq := 1; ; seq++ {
		n, err := client.Read(buf)
		if n > 0 {
			m := Message{Conn: conn, Seq: seq, Data: buf[:n]}
			a := p.decide(m)
			if a == ResetRequest {
				netreset.Conn(client)
				break
			}
			if a != Forward {
				mu.Lock()
				if pending == Forward {
					pending = a
					if a == AfterReply {
						m.Data = append([]byte(nil), m.Data...)
						asked = m
					}
				}
				mu.Unlock()
			}
			if _, err := server.Write(buf[:n]); err != nil {
				netreset.Conn(client)
				break
			}
		}
		if err != nil {
			break
		}
	}
	server.Close()
	<-done
}

// nonNil returns b, or an empty slice for nil, so that a Rule asked again
// after a reply with no bytes still sees a non-nil Reply.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// silent keeps c open without answering until the client closes it (or
// the proxy is closed), discarding what it sends.
func silent(c net.Conn) {
	buf := make([]byte, 4<<10)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}
