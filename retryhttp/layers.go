package retryhttp

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
)

// Headers that carry retry information between services and, on the
// responses a [Transport] returns, to the caller.
const (
	// HeaderAttempt, on a request, is set on every retry the transport
	// sends, to the 1-based attempt number ("2" for the first retry); a
	// first attempt does not carry it (one already in the caller's request
	// is left out). On a response that a Transport
	// returns after more than one attempt, it is set to the number of
	// attempts made (so the response answers the attempt it names); see
	// [Attempts].
	HeaderAttempt = "Retry-Attempt"

	// HeaderExhausted, on a response, means "already retried below, do not
	// retry". A [Transport] sets it to "1" on a response it gave up on
	// after retrying (see [Exhausted]); [Middleware] sets it on a
	// service's failing responses (statuses that DefaultRetryStatus
	// accepts) when the service's own outgoing calls were retried to
	// exhaustion while it served the request. A Transport that receives
	// it returns the response without retrying, so that only the layer
	// next to the failure retries.
	HeaderExhausted = "Retry-Exhausted"
)

// mark records on resp's header how many attempts produced it and, when
// exhausted, that the transport gave up on it. The marks live in the
// header, which survives what callers and clients do with a response:
// http.Client.Timeout wraps the body, generated API clients turn a
// response into an error value that keeps the status, body bytes and
// header. A response obtained at once is not touched, except to add
// HeaderExhausted when a policy of one attempt gave up on it.
func (c *call) mark(resp *http.Response, exhausted bool) *http.Response {
	if c.n <= 1 && !exhausted {
		return resp
	}
	if resp.Header == nil {
		resp.Header = make(http.Header, 2)
	}
	if c.n > 1 {
		resp.Header.Set(HeaderAttempt, strconv.Itoa(c.n))
	}
	if exhausted {
		resp.Header.Set(HeaderExhausted, "1")
	}
	return resp
}

// Attempts returns how many attempts a [Transport] made to obtain resp,
// from its [HeaderAttempt] header: 1 for a response obtained at once (or
// not from a Transport, or with a header that is not a positive number),
// 0 for nil. It works through any body wrapper, and on any response
// rebuilt from the original's header.
func Attempts(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	if v := resp.Header.Get(HeaderAttempt); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 1 {
			return n
		}
	}
	return 1
}

// Exhausted reports whether resp carries [HeaderExhausted]: a failing
// response that a [Transport] gave up on after retrying, or that a server
// behind [Middleware] marked. An enclosing retry layer should not retry
// it. Like [Attempts], it reads only the header, so it works behind any
// body wrapper and on a response rebuilt from the original's header (for
// example from a googleapi.Error's Header).
func Exhausted(resp *http.Response) bool {
	return resp != nil && resp.Header.Get(HeaderExhausted) != ""
}

type trackerKey struct{}

// tracker records, for one request served through Middleware, whether an
// outgoing call gave up.
type tracker struct{ exhausted atomic.Bool }

func markTracker(ctx context.Context) {
	if t, ok := ctx.Value(trackerKey{}).(*tracker); ok {
		t.exhausted.Store(true)
	}
}

// Middleware wraps a server's handler so that retry exhaustion is passed
// up a chain of services instead of multiplied. Outgoing requests made with
// a [Transport] under the served request's context (r.Context() or a
// child) report to it when they give up (or when the context's deadline
// ends them after they retried); if the handler then answers with
// a status that DefaultRetryStatus accepts, the response carries
// [HeaderExhausted] and transports above do not retry it. With four
// services in a chain, each retrying 4 times, the last one then receives
// 4 requests per client request instead of 64.
func Middleware(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := new(tracker)
		ctx := context.WithValue(r.Context(), trackerKey{}, t)
		h.ServeHTTP(&exhaustWriter{ResponseWriter: w, t: t}, r.WithContext(ctx))
	})
}

type exhaustWriter struct {
	http.ResponseWriter
	t     *tracker
	wrote bool
}

func (w *exhaustWriter) WriteHeader(code int) {
	// 1xx are informational, except 101 Switching Protocols, which net/http
	// treats as the final header: a Write or Flush after it must not add a
	// 200 of its own.
	if !w.wrote && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.wrote = true
		if DefaultRetryStatus(code) && w.t.exhausted.Load() {
			w.Header().Set(HeaderExhausted, "1")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *exhaustWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// ReadFrom implements io.ReaderFrom, as net/http's own ResponseWriter does
// (io.Copy to it uses sendfile for a file), passing on to the underlying
// writer's ReadFrom when it has one.
func (w *exhaustWriter) ReadFrom(r io.Reader) (int64, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{w.ResponseWriter}, r)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *exhaustWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush implements http.Flusher when the underlying writer does.
func (w *exhaustWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Push implements http.Pusher (HTTP/2 server push) through the underlying
// writer, or the writers it unwraps to; without one it returns
// http.ErrNotSupported, as a Pusher does when push is not available.
func (w *exhaustWriter) Push(target string, opts *http.PushOptions) error {
	rw := w.ResponseWriter
	for {
		switch u := rw.(type) {
		case http.Pusher:
			return u.Push(target, opts)
		case interface{ Unwrap() http.ResponseWriter }:
			rw = u.Unwrap()
		default:
			return http.ErrNotSupported
		}
	}
}

// Hijack implements http.Hijacker when the underlying writer does.
func (w *exhaustWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}
