package retryhttp

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// errNilResponse stands for the answer of a Base that broke the
// http.RoundTripper contract by returning neither a response nor an error.
var errNilResponse = errors.New("retryhttp: Base returned a nil *http.Response and a nil error")

// getBodyError is the error of a retry whose request body could not be
// made again by the request's GetBody.
type getBodyError struct{ err error }

func (e *getBodyError) Error() string { return "retryhttp: GetBody: " + e.err.Error() }
func (e *getBodyError) Unwrap() error { return e.err }

// attemptTimeoutError is the error of an attempt cut short by
// Policy.AttemptTimeout. The loop tells such an attempt from the
// attempt's own context, as retry.Do does (retried, a rejection for a
// Throttle, never handed to Retryable); this error is what the hooks and
// the caller see: a timeout, not a context error, that reports Overloaded.
type attemptTimeoutError struct {
	d   time.Duration
	err error // what Base returned, if anything
}

func (e *attemptTimeoutError) Error() string {
	return "retryhttp: attempt timed out after " + e.d.String()
}
func (e *attemptTimeoutError) Timeout() bool    { return true }
func (e *attemptTimeoutError) Temporary() bool  { return true }
func (e *attemptTimeoutError) Overloaded() bool { return true }

// statusError is the error of an attempt that got a retryable status.
type statusError struct {
	resp    *http.Response
	method  string
	url     *url.URL
	attempt int
	hint    Hint // the server's hint that asks for the wait, if any (see hinted)
}

func (e *statusError) Error() string {
	return "retryhttp: " + e.method + " " + redact(e.url) + ": " + e.resp.Status + " (attempt " + strconv.Itoa(e.attempt) + ")"
}

// Overloaded reports whether the server said it is overloaded (429 or 503),
// which is what retry.Throttle counts as a rejection by default.
func (e *statusError) Overloaded() bool {
	return e.resp.StatusCode == http.StatusTooManyRequests || e.resp.StatusCode == http.StatusServiceUnavailable
}

// StatusCode returns the response's status code.
func (e *statusError) StatusCode() int { return e.resp.StatusCode }

// exhaustedError is the error of a response that a lower retry layer
// marked Retry-Exhausted: not retried, reported as an inner loop's.
type exhaustedError struct{ *statusError }

func (e exhaustedError) Unwrap() error   { return e.statusError }
func (e exhaustedError) Exhausted() bool { return true }

// attemptError is the error of an attempt that got no response.
type attemptError struct {
	method  string
	url     *url.URL
	attempt int
	err     error
}

func (e *attemptError) Error() string {
	msg := e.err.Error()
	var ue *url.Error
	if errors.As(e.err, &ue) {
		msg = ue.Err.Error() // its URL may hold secrets
	}
	msg = strings.TrimPrefix(msg, "retryhttp: ") // one of ours, such as a HoldError: said once
	return "retryhttp: " + e.method + " " + redact(e.url) + ": " + msg + " (attempt " + strconv.Itoa(e.attempt) + ")"
}

func (e *attemptError) Unwrap() error { return e.err }

// redact returns u without a password and with every query value
// replaced by "xxx".
func redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	v := *u
	if v.User != nil {
		if _, has := v.User.Password(); has {
			v.User = url.UserPassword(v.User.Username(), "xxxxx")
		}
	}
	if v.RawQuery != "" {
		parts := strings.Split(v.RawQuery, "&")
		for i, p := range parts {
			if k, _, ok := strings.Cut(p, "="); ok {
				parts[i] = k + "=xxx"
			}
		}
		v.RawQuery = strings.Join(parts, "&")
	}
	v.Fragment, v.RawFragment = "", ""
	return v.String()
}
