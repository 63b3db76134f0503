// Package retrygrpctest is the gRPC piece of the retrytest kit: a
// server-side interceptor that answers each call attempt by attempt from a
// script (a status code, a grpc-retry-pushback-ms trailer, a RetryInfo
// detail, a latency, a lost reply) in front of the real service, and
// counts the attempts and the applied attempts of each method. It works
// with grpc-go's in-memory bufconn listener, so a client's retries can be
// tested without sockets, and with a loopback listener.
//
// A scripted reply with code OK lets the call through to the service (the
// attempt is applied when the service answers without error); any other
// code answers for it, and the service never sees the attempt. A lost
// reply lets the call through, then closes the connection it came on
// before the answer goes out: the client sees UNAVAILABLE and cannot know
// that the service acted.
//
// The guide is docs/testing.md in the repository.
package retrygrpctest

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/retrykit/retry/retrytest"
)

// TrailerPushback is the trailer gRFC A6 servers send to ask for a wait
// before a retry, in milliseconds.
const TrailerPushback = "grpc-retry-pushback-ms"

// Reply is one scripted answer. The zero Reply lets the call through to
// the service.
type Reply struct {
	// Code is the status code the call ends with. OK (zero) lets the call
	// through to the service, which answers it.
	Code codes.Code
	// Message is the status message of a Code other than OK.
	Message string
	// Pushback, when not empty, is sent verbatim as the
	// grpc-retry-pushback-ms trailer: "250" asks for 250 ms, "-1" (or any
	// malformed value) asks the client not to retry.
	Pushback string
	// RetryDelay, when positive, adds a google.rpc.RetryInfo detail with
	// that retry_delay to the status of a Code other than OK.
	RetryDelay time.Duration
	// Latency is how long the server waits before it acts, on the clock;
	// a call whose context ends first is not applied and ends with the
	// context's status. Zero means no wait.
	Latency time.Duration
	// Lost lets the call through to the service, then closes the
	// connection before the answer goes out. It needs the grpc.Server to
	// serve on [Server.Listener]'s wrapper; without it the call ends with
	// UNAVAILABLE after the service ran, over a connection that stays up.
	Lost bool
}

// Server answers calls from scripts and counts them. Get one with
// [NewServer]; install [Server.UnaryInterceptor] on the grpc.Server and
// serve on [Server.Listener]'s wrapper of the listener (for lost replies).
// It is safe for concurrent use.
type Server struct {
	// Key names the call an attempt belongs to, for scripts and counts.
	// Nil means the full method name, "/pkg.Service/Method". Set it before
	// the first call.
	Key func(ctx context.Context, method string) string

	mu     sync.Mutex
	script []Reply
	per    map[string][]Reply
	counts map[string]*retrytest.Count
	total  retrytest.Count
	conns  map[connAddr]net.Conn
	nextID atomic.Uint64
}

// NewServer returns a Server whose calls each follow script; once a
// call's script is used up, its last reply repeats. An empty script lets
// every call through.
func NewServer(script ...Reply) *Server {
	return &Server{script: script, per: map[string][]Reply{}, counts: map[string]*retrytest.Count{},
		conns: map[connAddr]net.Conn{}}
}

// Script sets the script of the call named key (a full method name, by
// default), for the attempts still to come.
func (s *Server) Script(key string, script ...Reply) {
	s.mu.Lock()
	s.per[key] = script
	s.mu.Unlock()
}

// Count returns what the server saw of the call named key.
func (s *Server) Count(key string) retrytest.Count {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.counts[key]; c != nil {
		return *c
	}
	return retrytest.Count{}
}

// Total returns what the server saw of every call together.
func (s *Server) Total() retrytest.Count {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// next counts one attempt of the call named k and returns its reply.
func (s *Server) next(k string) Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.counts[k]
	if c == nil {
		c = &retrytest.Count{}
		s.counts[k] = c
	}
	c.Requests++
	s.total.Requests++
	script, ok := s.per[k]
	if !ok {
		script = s.script
	}
	if len(script) == 0 {
		return Reply{}
	}
	return script[min(c.Requests, len(script))-1]
}

func (s *Server) applied(k string) {
	s.mu.Lock()
	s.counts[k].Applied++
	s.total.Applied++
	s.mu.Unlock()
}

// UnaryInterceptor answers each unary call from its script, as the package
// doc says. Install it with grpc.UnaryInterceptor (or first in
// grpc.ChainUnaryInterceptor, to answer before other interceptors).
func (s *Server) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	var resp any
	err := s.serve(ctx, info.FullMethod, func(ctx context.Context) (err error) {
		resp, err = handler(ctx, req)
		return err
	})
	return resp, err
}

// StreamInterceptor answers each stream from its script when it opens: a
// Code other than OK ends the stream before the service sees it; OK and a
// lost reply run the service's handler (a lost reply then closes the
// connection). Install it with grpc.StreamInterceptor.
func (s *Server) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return s.serve(ss.Context(), info.FullMethod, func(context.Context) error { return handler(srv, ss) })
}

// serve runs one attempt of method as its script says; run calls the
// service.
func (s *Server) serve(ctx context.Context, method string, run func(context.Context) error) error {
	k := method
	if s.Key != nil {
		k = s.Key(ctx, method)
	}
	r := s.next(k)
	if r.Latency > 0 {
		t := time.NewTimer(r.Latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	if r.Pushback != "" {
		grpc.SetTrailer(ctx, metadata.Pairs(TrailerPushback, r.Pushback))
	}
	if r.Code != codes.OK && !r.Lost {
		return r.status()
	}
	err := run(ctx)
	if err == nil {
		s.applied(k)
	}
	if r.Lost {
		s.drop(ctx)
		return status.Error(codes.Unavailable, "retrygrpctest: reply lost")
	}
	return err
}

// status is the error of a reply with a Code other than OK.
func (r *Reply) status() error {
	st := status.New(r.Code, r.Message)
	if r.RetryDelay > 0 {
		if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(r.RetryDelay)}); err == nil {
			st = d
		}
	}
	return st.Err()
}

// Listener returns lis with each accepted connection marked, so that a
// lost reply can close the connection its call came on. Serve the
// grpc.Server on it.
func (s *Server) Listener(lis net.Listener) net.Listener { return &listener{Listener: lis, s: s} }

type listener struct {
	net.Listener
	s *Server
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	a := connAddr{id: l.s.nextID.Add(1), addr: c.RemoteAddr().String()}
	l.s.mu.Lock()
	l.s.conns[a] = c
	l.s.mu.Unlock()
	return &conn{Conn: c, addr: a, s: l.s}, nil
}

// connAddr is the remote address of a marked connection: grpc-go hands it
// to the call's context as its peer, which names the connection to drop.
type connAddr struct {
	id   uint64
	addr string
}

func (a connAddr) Network() string { return "retrygrpctest" }
func (a connAddr) String() string  { return a.addr + "#" + strconv.FormatUint(a.id, 10) }

type conn struct {
	net.Conn
	addr connAddr
	s    *Server
}

func (c *conn) RemoteAddr() net.Addr { return c.addr }

func (c *conn) Close() error {
	c.s.mu.Lock()
	delete(c.s.conns, c.addr)
	c.s.mu.Unlock()
	return c.Conn.Close()
}

// drop closes the connection of the call of ctx, when it came through
// the Listener's wrapper.
func (s *Server) drop(ctx context.Context) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return
	}
	a, ok := p.Addr.(connAddr)
	if !ok {
		return
	}
	s.mu.Lock()
	c := s.conns[a]
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
}
