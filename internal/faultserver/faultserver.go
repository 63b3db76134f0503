// Package faultserver is a deterministic fault-injecting HTTP handler for
// soak and end-to-end tests of retrying clients.
//
// A [Server] decides, for each request, whether to succeed or to inject one
// fault: a 500/502/503/504, a 429 with or without Retry-After (seconds or
// HTTP-date form), a connection reset (before or after applying the
// request's side effect), or a stall past the client's attempt timeout. The
// decision is a pure function of the seed, the request's identity
// (Idempotency-Key, else the X-Request-Id header, else method and URL) and
// how many times the server has seen that identity before, so a run does not
// depend on how concurrent requests interleave.
//
// Every request is recorded (method, path, keys, body SHA-256, fault). POST
// requests with an Idempotency-Key get idempotency semantics: the side effect
// of a key is applied once and later requests with the key replay the stored
// response; a key reused with another body gets 422. Side effects are counted
// so tests can prove that no request took effect twice.
//
// Use it with httptest.NewServer (HTTP/1.1; resets need http.Hijacker).
package faultserver

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/retrykit/retry/internal/netreset"
)

// RequestIDHeader names the request header that identifies one logical
// request across its attempts when it has no Idempotency-Key. Clients of the
// soak set it to a unique value per logical request.
const RequestIDHeader = "X-Request-Id"

// BodyHashHeader names the response header carrying the hex SHA-256 of the
// request body, on successful responses (the body carries it too).
const BodyHashHeader = "X-Body-Sha256"

// DefaultStall is the longest a stalled request is held when Config.Stall is
// zero.
const DefaultStall = 2 * time.Second

// Fault is what the server does with one request.
type Fault uint8

// The faults a Server can inject. OK is no fault.
const (
	OK               Fault = iota // 200 with the body hash; applies the side effect
	Status500                     // 500 Internal Server Error
	Status502                     // 502 Bad Gateway
	Status503                     // 503 Service Unavailable
	Status504                     // 504 Gateway Timeout
	TooMany                       // 429 without Retry-After
	TooManySeconds                // 429 with Retry-After in delta-seconds
	TooManyDate                   // 429 with Retry-After as an HTTP-date
	Reset                         // connection reset (RST) after reading the request, no side effect
	ResetAfterEffect              // side effect applied, then connection reset: the response is lost
	Stall                         // holds the request until the client gives up (or Config.Stall), then 503
	numFaults
)

// allFaults is the default fault mix: every fault except OK, once each.
var allFaults = []Fault{Status500, Status502, Status503, Status504, TooMany, TooManySeconds, TooManyDate, Reset, ResetAfterEffect, Stall}

// AllFaults returns every fault except OK, each once (a new slice).
func AllFaults() []Fault { return append([]Fault(nil), allFaults...) }

var faultNames = [...]string{"ok", "500", "502", "503", "504", "429", "429+retry-after-seconds", "429+retry-after-date", "reset", "reset-after-effect", "stall"}

// String returns a short name of the fault such as "503" or "reset".
func (f Fault) String() string {
	if int(f) < len(faultNames) {
		return faultNames[f]
	}
	return "fault(" + strconv.Itoa(int(f)) + ")"
}

// Config says which faults to inject and how often. The zero Config injects
// nothing: every request succeeds.
type Config struct {
	// Seed selects the deterministic sequence of decisions. Two servers with
	// the same Config decide the same for the same request identity and
	// attempt.
	Seed uint64

	// FaultRate is the probability, in [0, 1], that a request gets a fault.
	// Zero means never; 1 means always. Values outside [0, 1] are clamped.
	FaultRate float64

	// Faults is the mix of faults to choose from, uniformly; list a fault
	// several times to weight it. Nil or empty means AllFaults().
	Faults []Fault

	// RetryAfter is the wait the 429 faults ask for. The seconds form rounds
	// it up to whole seconds; the date form is now+RetryAfter at one-second
	// resolution (so zero is a date that has just passed). Zero means ask
	// for no wait ("Retry-After: 0").
	RetryAfter time.Duration

	// Stall is the longest a Stall fault holds a request; it ends earlier
	// when the request's context ends (the client gave up). Zero means
	// DefaultStall.
	Stall time.Duration

	// AttemptHeader, when set, names a request header whose value is
	// recorded as Request.AttemptHeader (for example the attempt number a
	// retrying client sends). Empty means none is recorded.
	AttemptHeader string
}

// Request is the record of one request the server received.
type Request struct {
	Seq           int       // arrival order, from 0
	At            time.Time // when the server had read the request body
	Method        string    // request method
	Path          string    // URL path
	Key           string    // Idempotency-Key header, "" when absent
	ID            string    // RequestIDHeader header, "" when absent
	Attempt       int       // how many earlier requests had the same identity
	AttemptHeader string    // value of Config.AttemptHeader, "" when absent or not configured
	BodyLen       int64     // bytes of request body read
	BodySHA256    [32]byte  // SHA-256 of the request body
	BodyErr       string    // error reading the body, "" when it was read whole
	Fault         Fault     // what the server did
	Replayed      bool      // an idempotent POST answered from the stored response
}

// Stats summarises what a Server did.
type Stats struct {
	Requests    int           // requests received
	Faults      int           // requests that got a fault (not OK)
	ByFault     map[Fault]int // requests per decision, OK included
	SideEffects int           // side effects applied (see Server.SideEffects)
	Replays     int           // idempotent POSTs answered from the stored response
	Conflicts   int           // 422s: Idempotency-Key reused with another body
	Elapsed     time.Duration // from the first to the last request
}

// Server is an http.Handler that injects faults as its Config says and
// records every request. Create one with New; it is safe for concurrent use.
type Server struct {
	cfg    Config
	faults []Fault

	mu       sync.Mutex
	reqs     []Request
	seen     map[string]int
	effects  map[string]int      // side effects per identity
	stored   map[string][32]byte // Idempotency-Key -> body hash of the request that took effect
	replays  int
	conflict int
	first    time.Time
	last     time.Time
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	f := cfg.Faults
	if len(f) == 0 {
		f = allFaults
	}
	return &Server{
		cfg:     cfg,
		faults:  append([]Fault(nil), f...),
		seen:    make(map[string]int),
		effects: make(map[string]int),
		stored:  make(map[string][32]byte),
	}
}

// identity is the name of the logical request r belongs to.
func identity(r *http.Request) string {
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		return "key:" + k
	}
	if id := r.Header.Get(RequestIDHeader); id != "" {
		return "id:" + id
	}
	return "url:" + r.Method + " " + r.URL.RequestURI()
}

// Decide returns the fault the server injects into attempt (0-based) of the
// logical request named id. It is a pure function of the Config.
func (s *Server) Decide(id string, attempt int) Fault {
	rate := s.cfg.FaultRate
	if !(rate > 0) {
		return OK
	}
	h := sha256.New()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], s.cfg.Seed)
	binary.LittleEndian.PutUint64(b[8:], uint64(attempt))
	h.Write(b[:])
	io.WriteString(h, id)
	var sum [32]byte
	h.Sum(sum[:0])
	u := float64(binary.LittleEndian.Uint64(sum[:8])>>11) / (1 << 53)
	if rate < 1 && u >= rate {
		return OK
	}
	return s.faults[binary.LittleEndian.Uint64(sum[8:16])%uint64(len(s.faults))]
}

// ServeHTTP reads the whole request body, records the request and answers
// it as Decide says.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := sha256.New()
	n, err := io.Copy(h, r.Body)
	var sum [32]byte
	h.Sum(sum[:0])
	rec := Request{
		Method:     r.Method,
		Path:       r.URL.Path,
		Key:        r.Header.Get("Idempotency-Key"),
		ID:         r.Header.Get(RequestIDHeader),
		BodyLen:    n,
		BodySHA256: sum,
	}
	if err != nil {
		rec.BodyErr = err.Error()
	}
	if s.cfg.AttemptHeader != "" {
		rec.AttemptHeader = r.Header.Get(s.cfg.AttemptHeader)
	}
	id := identity(r)

	s.mu.Lock()
	now := time.Now()
	if len(s.reqs) == 0 {
		s.first = now
	}
	s.last = now
	rec.Seq = len(s.reqs)
	rec.At = now
	rec.Attempt = s.seen[id]
	s.seen[id]++
	rec.Fault = s.Decide(id, rec.Attempt)
	if err != nil && (rec.Fault == OK || rec.Fault == ResetAfterEffect) {
		rec.Fault = Reset // never apply an effect for a body we did not get whole
	}
	status := 0
	if rec.Fault == OK || rec.Fault == ResetAfterEffect {
		status, rec.Replayed = s.applyLocked(id, &rec)
	}
	s.reqs = append(s.reqs, rec)
	s.mu.Unlock()

	hexSum := hex.EncodeToString(sum[:])
	switch rec.Fault {
	case OK:
		if status == http.StatusUnprocessableEntity {
			http.Error(w, "faultserver: Idempotency-Key reused with another body", status)
			return
		}
		w.Header().Set(BodyHashHeader, hexSum)
		w.Header().Set("Content-Type", "text/plain")
		if rec.Replayed {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, hexSum+"\n")
	case Status500, Status502, Status503, Status504:
		code := [...]int{Status500: 500, Status502: 502, Status503: 503, Status504: 504}[rec.Fault]
		http.Error(w, "faultserver: injected "+rec.Fault.String(), code)
	case TooMany:
		http.Error(w, "faultserver: injected 429", http.StatusTooManyRequests)
	case TooManySeconds:
		secs := int64(math.Ceil(s.cfg.RetryAfter.Seconds()))
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		http.Error(w, "faultserver: injected 429", http.StatusTooManyRequests)
	case TooManyDate:
		w.Header().Set("Retry-After", time.Now().Add(s.cfg.RetryAfter).UTC().Format(http.TimeFormat))
		http.Error(w, "faultserver: injected 429", http.StatusTooManyRequests)
	case Reset, ResetAfterEffect:
		netreset.Response(w)
	case Stall:
		d := s.cfg.Stall
		if d <= 0 {
			d = DefaultStall
		}
		t := time.NewTimer(d)
		select {
		case <-r.Context().Done():
		case <-t.C:
		}
		t.Stop()
		http.Error(w, "faultserver: stalled", http.StatusServiceUnavailable)
	}
}

// applyLocked applies the side effect of the request named id, with
// idempotency semantics for POST with an Idempotency-Key. It returns 422 for
// a key reused with another body, and whether the response is a replay.
// s.mu must be held.
func (s *Server) applyLocked(id string, rec *Request) (status int, replayed bool) {
	if rec.Method == http.MethodPost && rec.Key != "" {
		if h, ok := s.stored[rec.Key]; ok {
			if h != rec.BodySHA256 {
				s.conflict++
				return http.StatusUnprocessableEntity, false
			}
			s.replays++
			return http.StatusOK, true
		}
		s.stored[rec.Key] = rec.BodySHA256
	}
	s.effects[id]++
	return http.StatusOK, false
}

// Requests returns a copy of the records of every request received so far,
// in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// SideEffects returns how many side effects each logical request has had,
// by identity: "key:"+Idempotency-Key, "id:"+X-Request-Id, or
// "url:"+method+" "+URI. A side effect is applied by an OK or
// ResetAfterEffect decision, except that a POST whose Idempotency-Key
// already took effect is replayed instead. A correct client against this
// server never makes a count exceed 1.
func (s *Server) SideEffects() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int, len(s.effects))
	for k, v := range s.effects {
		m[k] = v
	}
	return m
}

// Stats returns a summary of what the server has done so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Requests: len(s.reqs), ByFault: make(map[Fault]int), Replays: s.replays, Conflicts: s.conflict}
	for _, r := range s.reqs {
		st.ByFault[r.Fault]++
		if r.Fault != OK {
			st.Faults++
		}
	}
	for _, v := range s.effects {
		st.SideEffects += v
	}
	if len(s.reqs) > 0 {
		st.Elapsed = s.last.Sub(s.first)
	}
	return st
}

// String formats the statistics on one line, faults by name.
func (st Stats) String() string {
	out := fmt.Sprintf("%d requests, %d faults", st.Requests, st.Faults)
	for f := Fault(0); f < numFaults; f++ {
		if n := st.ByFault[f]; n > 0 {
			out += fmt.Sprintf(", %s=%d", f, n)
		}
	}
	return out + fmt.Sprintf(", %d side effects, %d replays, %d conflicts", st.SideEffects, st.Replays, st.Conflicts)
}

// ConnCounter counts connections by state; install its Hook as
// http.Server.ConnState (httptest.NewUnstartedServer) to check that clients
// do not leak connections. Its zero value is ready; safe for concurrent use.
type ConnCounter struct {
	mu     sync.Mutex
	states map[http.ConnState]int
}

// Hook records that a connection entered state. Use it as http.Server.ConnState.
func (c *ConnCounter) Hook(_ net.Conn, state http.ConnState) {
	c.mu.Lock()
	if c.states == nil {
		c.states = make(map[http.ConnState]int)
	}
	c.states[state]++
	c.mu.Unlock()
}

// Count returns how many connections have entered state.
func (c *ConnCounter) Count(state http.ConnState) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.states[state]
}

// Open returns connections that are new but neither closed nor hijacked.
func (c *ConnCounter) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.states[http.StateNew] - c.states[http.StateClosed] - c.states[http.StateHijacked]
}
