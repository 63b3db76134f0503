// Package netreset drops connections with a TCP reset, for the test kit
// (retrytest) and the project's fault-injecting test servers.
package netreset

import (
	"net"
	"net/http"
)

// Conn closes c with a TCP RST rather than an orderly FIN, when c is a TCP
// connection; other connections are closed.
func Conn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// Response drops the connection under w: a TCP RST when the connection can
// be hijacked (HTTP/1.1), else a panic with http.ErrAbortHandler, which
// makes the server abort the response (an HTTP/2 stream reset).
func Response(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	Conn(conn)
}
