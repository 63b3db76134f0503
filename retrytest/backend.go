package retrytest

import (
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/retrykit/retry/internal/netreset"
)

// Reply is one scripted answer of a [Backend], or one fault that [Chaos]
// injects. The zero Reply is a 200 with no header and no body.
type Reply struct {
	// Status is the response's status code. Zero means 200 for a Backend;
	// for Chaos, zero means the request is passed on (after Latency).
	Status int
	// Header holds the response's header fields, such as Retry-After,
	// RateLimit or retry-after-ms. Nil means none.
	Header http.Header
	// Body is the response body. Empty means none.
	Body string
	// Latency is how long the server takes before it acts and answers,
	// waited on the clock, so that inside a synctest bubble it passes at
	// once. A request whose context ends first is not applied and gets
	// the context's error. Zero means no wait.
	Latency time.Duration
	// Err, when set, fails the request without applying it. As a
	// RoundTripper, the client gets Err itself; as an http.Handler, the
	// connection is reset before the request is applied.
	Err error
	// Lost, when set, applies the request and then drops the reply: the
	// client sees its connection reset (ECONNRESET) and cannot know that
	// the server acted. Status, Header and Body are ignored.
	Lost bool
}

// applied reports whether the server acts on a request answered by r: a
// 2xx, or a lost reply.
func (r *Reply) applied() bool {
	return r.Err == nil && (r.Lost || r.status() >= 200 && r.status() <= 299)
}

func (r *Reply) status() int {
	if r.Status == 0 {
		return http.StatusOK
	}
	return r.Status
}

// Count is what a [Backend] saw of one call, or of all calls.
type Count struct {
	Requests int // requests received (attempts, hedges included)
	Applied  int // requests the server acted on: 2xx and lost replies
}

// Request is the record of one request a [Backend] received.
type Request struct {
	Key     string      // the call it belongs to (see Backend.Key)
	Attempt int         // its rank within the call, from 1
	Method  string      // request method
	URL     string      // request URL
	Header  http.Header // a copy of the request's header
	Body    []byte      // the request body, read whole
	Reply   Reply       // the scripted reply it got
}

// Backend is a scripted in-memory HTTP server: it answers each call
// attempt by attempt from a script of [Reply] values, and counts the
// requests and the applied requests of each call. It is both an
// http.RoundTripper (no socket: set it as the Base of a retrying transport
// and run the test inside a synctest bubble) and an http.Handler (for
// httptest.NewServer, outside the bubble, where the wire matters).
//
// Get one with [NewBackend]; it is safe for concurrent use. A call is the
// set of requests with the same key (see Key); the n-th request of a call
// gets the n-th reply of the call's script, and once the script is used
// up its last reply repeats. An empty script answers 200.
type Backend struct {
	// Key names the call a request belongs to. Nil means [CallKey]: the
	// Idempotency-Key header, else the method and URL. Set it before the
	// first request.
	Key func(*http.Request) string

	mu     sync.Mutex
	script []Reply
	per    map[string][]Reply
	counts map[string]*Count
	total  Count
	log    []Request
}

// NewBackend returns a Backend whose calls each follow script.
func NewBackend(script ...Reply) *Backend {
	return &Backend{script: script, per: map[string][]Reply{}, counts: map[string]*Count{}}
}

// Script sets the script of the call named key, in place of the one given
// to NewBackend, for the requests of that call still to come.
func (b *Backend) Script(key string, script ...Reply) {
	b.mu.Lock()
	b.per[key] = script
	b.mu.Unlock()
}

// CallKey is the default call key: the Idempotency-Key header when the
// request has one, else the method and the URL, as "GET http://x/y".
func CallKey(r *http.Request) string {
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		return k
	}
	return r.Method + " " + r.URL.String()
}

// next records req and returns its call's key and the reply it gets.
func (b *Backend) next(req *http.Request, body []byte) (string, Reply) {
	key := CallKey
	if b.Key != nil {
		key = b.Key
	}
	k := key(req)
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.counts[k]
	if c == nil {
		c = &Count{}
		b.counts[k] = c
	}
	c.Requests++
	b.total.Requests++
	script, ok := b.per[k]
	if !ok {
		script = b.script
	}
	var r Reply
	if len(script) > 0 {
		r = script[min(c.Requests, len(script))-1]
	}
	b.log = append(b.log, Request{Key: k, Attempt: c.Requests, Method: req.Method, URL: req.URL.String(),
		Header: req.Header.Clone(), Body: body, Reply: r})
	return k, r
}

// apply counts one applied request of the call named k.
func (b *Backend) apply(k string) {
	b.mu.Lock()
	b.counts[k].Applied++
	b.total.Applied++
	b.mu.Unlock()
}

// Count returns what the backend saw of the call named key.
func (b *Backend) Count(key string) Count {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.counts[key]; c != nil {
		return *c
	}
	return Count{}
}

// Total returns what the backend saw of every call together.
func (b *Backend) Total() Count {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Requests returns a copy of the record of every request received so far,
// in arrival order.
func (b *Backend) Requests() []Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Request(nil), b.log...)
}

// RoundTrip answers req from the script without a network. It reads and
// closes req's body, waits the reply's Latency on the clock, and returns
// the scripted response, the reply's Err, or for a lost reply a
// connection reset, as a *net.OpError matching syscall.ECONNRESET.
func (b *Backend) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := readBody(req.Body)
	if err != nil {
		return nil, err
	}
	k, r := b.next(req, body)
	if err := wait(req, r.Latency); err != nil {
		return nil, err
	}
	if r.Err != nil {
		return nil, r.Err
	}
	if r.applied() {
		b.apply(k)
	}
	if r.Lost {
		return nil, errConnReset()
	}
	return response(req, &r), nil
}

// ServeHTTP answers r from the script over a real connection. A reply's
// Err, or a lost reply once applied, resets the connection (TCP RST over
// HTTP/1.1; over HTTP/2 the stream is reset).
func (b *Backend) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := readBody(req.Body)
	if err != nil {
		netreset.Response(w)
		return
	}
	k, r := b.next(req, body)
	if wait(req, r.Latency) != nil {
		return
	}
	if r.applied() {
		b.apply(k)
	}
	if r.Err != nil || r.Lost {
		netreset.Response(w)
		return
	}
	writeReply(w, &r)
}

// wait waits d on the clock, or until req's context ends, whose error it
// then returns.
func wait(req *http.Request, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-req.Context().Done():
		return req.Context().Err()
	}
}

// response builds the *http.Response of a scripted reply to req.
func response(req *http.Request, r *Reply) *http.Response {
	code := r.status()
	h := r.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{
		Status:        strconv.Itoa(code) + " " + http.StatusText(code),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(r.Body)),
		ContentLength: int64(len(r.Body)),
		Request:       req,
	}
}

// writeReply writes a scripted reply to w.
func writeReply(w http.ResponseWriter, r *Reply) {
	for name, v := range r.Header {
		w.Header()[name] = append([]string(nil), v...)
	}
	w.WriteHeader(r.status())
	io.WriteString(w, r.Body)
}

// errConnReset is the error a client sees when its connection is reset
// while it waits for the reply, as net/http reports it.
func errConnReset() error {
	return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
}

// readBody reads and closes a request body; nil reads as empty.
func readBody(rc io.ReadCloser) ([]byte, error) {
	if rc == nil || rc == http.NoBody {
		return nil, nil
	}
	defer rc.Close()
	return io.ReadAll(rc)
}
