package retryhttp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
)

// DefaultRetryStatus reports whether the default rule retries a response
// with the given status code: 408, 429 and every 5xx except 501 (Not
// Implemented), 505 (HTTP Version Not Supported) and 511 (Network
// Authentication Required), which waiting cannot heal. Other 4xx are never
// retried: waiting does not make an invalid request valid.
func DefaultRetryStatus(code int) bool {
	if code < 500 {
		return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
	}
	return code <= 599 && code != http.StatusNotImplemented && code != http.StatusHTTPVersionNotSupported &&
		code != http.StatusNetworkAuthenticationRequired
}

// idempotent reports whether method is idempotent per RFC 9110 9.2.2.
func idempotent(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// hasIdempotencyKey reports whether h carries an Idempotency-Key or
// X-Idempotency-Key header (the two that net/http itself honours) with a
// key in it, or nil-valued: net/http's way to mark a request idempotent
// without sending the header. A header whose values are all empty or
// blank is no key: the server sees none, and could apply the request
// once per copy sent.
func hasIdempotencyKey(h http.Header) bool {
	return isKey(h, "Idempotency-Key") || isKey(h, "X-Idempotency-Key")
}

func isKey(h http.Header, name string) bool {
	v, ok := h[name]
	if !ok {
		return false
	}
	if len(v) == 0 {
		return true
	}
	for _, k := range v {
		if strings.TrimSpace(k) != "" {
			return true
		}
	}
	return false
}

// notSent reports whether err proves that the request never left this
// process: the connection could not even be dialled.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// transient reports whether a transport error is worth retrying for a
// replayable request.
func transient(err error) bool {
	// Certificate and TLS errors do not heal by waiting.
	var (
		cve  *tls.CertificateVerificationError
		rhe  tls.RecordHeaderError
		uae  x509.UnknownAuthorityError
		he   x509.HostnameError
		cie  x509.CertificateInvalidError
		alrt tls.AlertError
	)
	if errors.As(err, &cve) || errors.As(err, &rhe) || errors.As(err, &uae) ||
		errors.As(err, &he) || errors.As(err, &cie) || errors.As(err, &alrt) {
		return false
	}
	if notSent(err) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	// net/http's bundled HTTP/2 exposes no typed GOAWAY error: its text is
	// the only way to recognise it.
	return strings.Contains(err.Error(), "GOAWAY")
}
