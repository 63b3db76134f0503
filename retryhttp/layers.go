package retryhttp

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
)

// Headers that carry retry information between services.
const (
	// HeaderAttempt is set on every retry the transport sends, to the
	// 1-based attempt number ("2" for the first retry). A first attempt
	// does not carry it.
	HeaderAttempt = "Retry-Attempt"

	// HeaderExhausted, on a response, means "already retried below, do not
	// retry": the service's own outgoing calls were retried to exhaustion
	// while it served the request. [Middleware] sets it to "1" on failing
	// responses (statuses that DefaultRetryStatus accepts) and a
	// [Transport] that receives it returns the response without retrying,
	// so that only the layer next to the failure retries.
	HeaderExhausted = "Retry-Exhausted"
)

// markedBody wraps the body of a response that took more than one attempt
// or that the transport gave up on.
type markedBody struct {
	io.ReadCloser
	attempts  int
	exhausted bool
}

func (c *call) mark(resp *http.Response, exhausted bool) *http.Response {
	if c.n <= 1 && !exhausted {
		return resp
	}
	resp.Body = &markedBody{ReadCloser: resp.Body, attempts: c.n, exhausted: exhausted}
	return resp
}

// Attempts returns how many attempts a [Transport] made to obtain resp: 1
// for a response obtained at once (or not from a Transport), 0 for nil.
func Attempts(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	if m, ok := resp.Body.(*markedBody); ok {
		return m.attempts
	}
	return 1
}

// Exhausted reports whether resp is a failing response that a [Transport]
// gave up on after retrying (or that said [HeaderExhausted]): an enclosing
// retry loop should not retry it.
func Exhausted(resp *http.Response) bool {
	return isMarkedExhausted(resp)
}

func isMarkedExhausted(resp *http.Response) bool {
	if resp == nil {
		return false
	}
	m, ok := resp.Body.(*markedBody)
	return ok && m.exhausted
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
// child) report to it when they give up; if the handler then answers with
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
	if !w.wrote && code >= 200 {
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

// Hijack implements http.Hijacker when the underlying writer does.
func (w *exhaustWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}
