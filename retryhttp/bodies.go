package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
)

// errReleased ends the body of a response returned after its unread rest
// was closed before the wait for a retry that was then not sent.
var errReleased = errors.New("retryhttp: the rest of this response's body was discarded before the wait for a retry that was not sent")

// released reports whether resp is a response whose body Observe closed
// before the wait for a retry.
func released(resp *http.Response) bool {
	rb, ok := resp.Body.(*readBody)
	return ok && rb.err == errReleased
}

// bufferBody reads the caller's body (no GetBody) up to the limit. It
// reports false when the body is larger; c.buf then holds the prefix read.
// If the request's context ends during the read, the body is closed, as
// http.Transport closes the body it is sending, so that a read blocked on
// a producer (a pipe) returns; the loop then sees the context's end.
func (c *call) bufferBody() bool {
	limit := c.t.maxBufferedBody()
	if limit < 0 {
		return false
	}
	stop := context.AfterFunc(c.ctx, func() { c.req.Body.Close() })
	b, err := io.ReadAll(io.LimitReader(c.req.Body, limit+1))
	closed := !stop() // the AfterFunc closed the body, or is closing it: it owns the Close
	if closed {
		c.bodyUsed = true
	}
	c.buf = b
	if err != nil || int64(len(b)) > limit {
		return false
	}
	if !closed {
		c.req.Body.Close()
	}
	c.bodyUsed = true
	c.buffered = true
	return true
}

// streamBody returns the buffered prefix followed by the rest of the
// caller's body, closing the caller's body when closed.
func (c *call) streamBody() io.ReadCloser {
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(c.buf), c.req.Body), c.req.Body}
}

// newCancelBody returns body wrapped so that closing it ends the attempt's
// context. The wrapper keeps the body's capabilities: the body of a 101
// Switching Protocols response is an io.ReadWriteCloser, and so is its
// wrapper.
func newCancelBody(body io.ReadCloser, cancel context.CancelFunc) io.ReadCloser {
	if rw, ok := body.(io.ReadWriteCloser); ok {
		return &cancelRWBody{rw, cancel}
	}
	return &cancelBody{body, cancel}
}

// cancelBody ends an attempt's context when the body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// cancelRWBody is cancelBody for a writable body.
type cancelRWBody struct {
	io.ReadWriteCloser
	cancel context.CancelFunc
}

func (b *cancelRWBody) Close() error {
	err := b.ReadWriteCloser.Close()
	b.cancel()
	return err
}

// release frees the connection of a response the loop will probably
// retry, before the wait: it reads the rest of the body, up to maxDrain
// bytes, closes it, and leaves what it read in resp.Body, so that the
// response can still be returned whole if the loop gives up instead. A
// body longer than that cannot leave its connection reusable anyway; it
// stays open (its prefix read) until the loop decides: call.Observe
// closes it when the loop is about to wait for a retry.
func release(resp *http.Response) {
	if resp.Body == nil || resp.Body == http.NoBody || resp.ContentLength > maxDrain {
		return
	}
	var buf bytes.Buffer
	_, err := buf.ReadFrom(io.LimitReader(resp.Body, maxDrain+1))
	if err == nil && buf.Len() > maxDrain {
		resp.Body = &prefixBody{bytes.NewReader(buf.Bytes()), resp.Body}
		return
	}
	resp.Body.Close()
	resp.Body = &readBody{r: bytes.NewReader(buf.Bytes()), err: err}
}

// readBody is a body read in full by release: its bytes, then the error
// that ended the read (io.EOF when the body was complete).
type readBody struct {
	r   *bytes.Reader
	err error
}

func (b *readBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF && b.err != nil {
		err = b.err
	}
	return n, err
}

func (b *readBody) Close() error { return nil }

// prefixBody is a body whose first bytes release has read.
type prefixBody struct {
	prefix *bytes.Reader
	rest   io.ReadCloser
}

func (b *prefixBody) Read(p []byte) (int, error) {
	if b.prefix.Len() > 0 {
		return b.prefix.Read(p)
	}
	return b.rest.Read(p)
}

func (b *prefixBody) Close() error { return b.rest.Close() }

// discard drains a bounded prefix of resp's body and closes it.
func discard(resp *http.Response) {
	if resp.Body == nil {
		return
	}
	io.CopyN(io.Discard, resp.Body, maxDrain)
	resp.Body.Close()
}
