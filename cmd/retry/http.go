package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// httpOptions holds the flags of `retry http`.
type httpOptions struct {
	method, data, dataFile, key, out string
	hasData, keyGiven                bool // -d, --idempotency-key given, even empty
	headers                          []string
}

func newHTTPCmd() *cobra.Command {
	o := &httpOptions{}
	cmd := &cobra.Command{
		Use:   "http [policy flags] [-X METHOD] [-H 'Name: value']... [-d DATA | --data-file FILE] [--idempotency-key KEY|auto] [-o FILE] URL",
		Short: "Send an HTTP request, retrying 408, 429, 5xx and connection failures",
		Long: `http sends one HTTP request through the retryhttp transport: the response body goes
to stdout (or -o FILE), the status and the retries to stderr. The server's timing
hints are honoured (Retry-After, retry-after-ms, x-ms-retry-after-ms, RateLimit,
X-RateLimit-Reset and RateLimit-Reset with a remaining of 0, x-ratelimit-reset-*),
waits over 5 minutes excepted; the retry line names the hint obeyed, as in
"retrying in 2s (RateLimit t=2)".

GET, HEAD, OPTIONS, TRACE, PUT and DELETE are retried. POST, PATCH and other
non-idempotent requests are sent once unless they carry an idempotency key
(--idempotency-key KEY, or auto for a random UUIDv4 kept for every attempt), or
the connection could not be made, or the server answered 429.

--attempt-timeout bounds each attempt from the moment it is sent: an attempt whose
response headers have not arrived by then is cancelled and retried, and the body of
the response that is printed must have arrived completely within the same limit,
counted from the start of its attempt, or retry http stops reading and exits 7
(what arrived stays written; it is not retried, as part of it may be printed).

-d DATA is the body as given; a DATA that starts with @, which names a file in curl,
is refused (bad input): give the file with --data-file FILE. --idempotency-key ''
is refused too (an empty key is none).

-o FILE is opened before the first request: a file that cannot be written is bad
input, and nothing is sent. It is truncated and written when a response arrives
(also for a final 4xx/5xx, whose body is written too), and removed again if retry
created it and no response arrived.

Everything printed from the network on stderr (status line, headers with -v, error
messages) has its control characters escaped (\x1b, \r, \u202e). The body goes to
stdout unchanged, except on a terminal, where control characters other than
newline and tab are shown escaped the same way: redirect stdout or use -o FILE for
the exact bytes.

Exit statuses: 0 for a final 1xx/2xx/3xx response, 22 for a final status of 400 or
more, 7 when no response arrived (connection refused, timeout, ...) or its body
ended early, 1 when the body could not be written (-o FILE or stdout),
125 for bad input (nothing sent), 130/143 when interrupted.`,
		Example: `  retry http http://127.0.0.1:8080/health
  retry http -X POST -H 'Content-Type: application/json' -d '{"n":1}' --idempotency-key auto https://api.example.test/orders
  retry http --attempts 5 --max-elapsed 30s -o out.bin https://example.test/file`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("http: want exactly one URL, got %d arguments", len(args))
			}
			return nil
		},
	}
	pf := addPolicyFlags(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.method, "request", "X", "", "request method (default GET, or POST with -d/--data-file)")
	f.StringArrayVarP(&o.headers, "header", "H", nil, "request header 'Name: value' (repeatable)")
	f.StringVarP(&o.data, "data", "d", "", "request body, sent as given; one that starts with @ is refused (curl reads a file there: use --data-file)")
	f.StringVar(&o.dataFile, "data-file", "", "read the request body from this file")
	f.StringVar(&o.key, "idempotency-key", "", "send Idempotency-Key: KEY so that POST/PATCH may be retried; auto generates a UUIDv4")
	f.StringVarP(&o.out, "output", "o", "", "write the response body to this file instead of stdout")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		p, err := pf.policy()
		if err != nil {
			return err
		}
		o.hasData, o.keyGiven = cmd.Flags().Changed("data"), cmd.Flags().Changed("idempotency-key")
		req, err := o.request(args[0])
		if err != nil {
			return err
		}
		return doHTTP(cmd.Context(), p, pf, req, o.out, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// request builds the request the flags describe, or a usage error.
func (o *httpOptions) request(rawURL string) (*http.Request, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, usagef("URL %q: %v", rawURL, errors.Unwrap(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, usagef("URL %q: want an absolute http:// or https:// URL", rawURL)
	}
	if port := u.Port(); port != "" {
		// url.Parse takes any digits; the dial would fail, and be retried.
		if n, err := strconv.Atoi(port); err != nil || n > 65535 {
			return nil, usagef("URL %q: port %q: want 0..65535", rawURL, port)
		}
	}
	if o.hasData && o.dataFile != "" {
		return nil, usagef("-d and --data-file exclude each other")
	}
	if o.hasData && strings.HasPrefix(o.data, "@") {
		// curl reads a file there (@- standard input); sending the name as
		// the body would send what the user did not mean.
		file := cmp.Or(o.data[1:], "FILE")
		if file == "-" {
			file = "/dev/stdin"
		}
		return nil, usagef("-d %q: retry http sends -d as it is and reads no file: use --data-file %s (also for a body that starts with @)",
			o.data, file)
	}
	var body []byte
	hasBody := false
	if o.hasData { // -d '' too: an empty body, as curl sends
		body, hasBody = []byte(o.data), true
	}
	if o.dataFile != "" {
		b, err := os.ReadFile(o.dataFile)
		if err != nil {
			return nil, usagef("--data-file %q: %v", o.dataFile, errors.Unwrap(err))
		}
		body, hasBody = b, true
	}
	method := o.method
	if method == "" {
		method = http.MethodGet
		if hasBody {
			method = http.MethodPost
		}
	}
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, u.String(), rd)
	if err != nil {
		return nil, usagef("-X %q: %v", method, err)
	}
	for _, h := range o.headers {
		name, value, ok := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, usagef("-H %q: want 'Name: value'", h)
		}
		if !validHeaderName(name) {
			return nil, usagef("-H %q: %q is not a valid header name", h, name)
		}
		value = strings.TrimSpace(value)
		if !validHeaderValue(value) {
			return nil, usagef("-H %q: the value holds a control character", h)
		}
		if strings.EqualFold(name, "Host") {
			req.Host = value
			continue
		}
		req.Header.Add(name, value)
	}
	if hasBody && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded") // as curl -d does
	}
	if o.keyGiven && o.key == "" {
		return nil, usagef("--idempotency-key \"\": an empty key is no key; give one, or auto for a random one")
	}
	if !validHeaderValue(o.key) {
		return nil, usagef("--idempotency-key %q: the key holds a control character", o.key)
	}
	switch o.key {
	case "":
	case "auto":
		req.Header.Set("Idempotency-Key", uuidV4())
	default:
		req.Header.Set("Idempotency-Key", o.key)
	}
	return req, nil
}

// uuidV4 returns a random UUID (RFC 9562 version 4) from crypto/rand.
func uuidV4() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand documents it)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// failure describes a failed attempt's error for the retry messages.
func failure(err error) string {
	var sc interface{ StatusCode() int }
	if errors.As(err, &sc) {
		return fmt.Sprintf("%d %s", sc.StatusCode(), http.StatusText(sc.StatusCode()))
	}
	msg := err.Error()
	if i := strings.Index(msg, " (attempt "); i >= 0 {
		msg = msg[:i]
	}
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	return msg
}

// hintObeyed names the server hint that set a retry's wait, as in
// "retrying in 2s (RateLimit t=2)", or "" when the policy set it.
func hintObeyed(ev retry.Event) string {
	if h, ok := retryhttp.WaitHint(ev); ok {
		return h.String()
	}
	return ""
}

// output is the -o FILE of retry http, opened before the first request so
// that a file that cannot be written is bad input, and nothing is sent.
type output struct {
	name    string
	f       *os.File
	created bool // the file did not exist: remove it if no response arrives
}

// openOutput opens name for writing without truncating it yet.
func openOutput(name string) (*output, error) { return openOutputFlag("-o", name) }

// openOutputFlag is openOutput for the file of flag, named in the usage
// error.
func openOutputFlag(flag, name string) (*output, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err == nil {
		return &output{name: name, f: f, created: true}, nil
	}
	if errors.Is(err, os.ErrExist) {
		// An existing file, or a symbolic link, which a dangling one's
		// target is created through, as a shell's > does (not removed
		// again on failure: name is the link).
		if f, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o666); err == nil {
			return &output{name: name, f: f}, nil
		}
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return nil, usagef("%s %q: %v", flag, name, err)
}

// truncate empties a regular file before the body is written; anything
// else (/dev/null, a pipe, a terminal) cannot be truncated and is written
// as it is, as a shell's > does.
func (o *output) truncate() error {
	fi, err := o.f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	return o.f.Truncate(0)
}

// abandon closes the file, and removes it if retry created it.
func (o *output) abandon() {
	o.f.Close()
	if o.created {
		os.Remove(o.name)
	}
}

// attemptClock is the Base of the CLI's retryhttp.Transport: it records
// when the latest attempt started, so that --attempt-timeout can bound the
// final response's body too.
type attemptClock struct {
	base http.RoundTripper
	mu   sync.Mutex
	last time.Time
}

func (a *attemptClock) RoundTrip(r *http.Request) (*http.Response, error) {
	a.mu.Lock()
	a.last = time.Now()
	a.mu.Unlock()
	return a.base.RoundTrip(r)
}

func (a *attemptClock) started() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

// doHTTP sends req through a retryhttp.Transport and writes the body to
// out (a file name) or stdout.
//
// --attempt-timeout (p.AttemptTimeout) bounds each attempt from the moment
// it is sent: an attempt without response headers by then is cancelled and
// retried (by the transport), and the body of the response that is printed
// must have arrived completely by the same limit, counted from the start of
// its attempt; otherwise retry http stops reading and exits 7 (what arrived
// stays written: it is not retried, as part of it may be printed already).
func doHTTP(ctx context.Context, p retry.Policy, pf *policyFlags, req *http.Request, out string, stdout, stderr io.Writer) error {
	var file *output
	if out != "" {
		var err error
		if file, err = openOutput(out); err != nil {
			return err
		}
	}
	rep := newReporter(stderr, pf)
	defer rep.endWait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ctx, signalled, stopSignals := interruptible(ctx)
	defer stopSignals()
	var start time.Time // set as the request is sent
	elapsed := func() int64 { return time.Since(start).Milliseconds() }
	interrupted := func() error {
		code := signalled()
		if code == 0 {
			return nil
		}
		name := "SIGINT"
		if code == exitSIGTERM {
			name = "SIGTERM"
		}
		rep.result(slog.LevelInfo, "interrupted by "+name+"; not retrying", "interrupted",
			"signal", name, "elapsed_ms", elapsed(), "exit_code", code)
		return &exitError{code: code}
	}
	target := req.URL.Redacted()

	rep.failure = failure
	rep.hint = hintObeyed
	p.Observer = rep
	rep.infof("%s", describe(p))
	rep.infof("%s %s", req.Method, req.URL.Redacted())
	if !idempotentMethod(req.Method) && !hasIdempotencyKey(req.Header) {
		rep.infof("%s without an idempotency key: sent once, retried only if the connection cannot be made or the server answers 429 (--idempotency-key KEY or auto allows retries)", req.Method)
	}
	clock := &attemptClock{base: http.DefaultTransport}
	client := &http.Client{Transport: &retryhttp.Transport{Base: clock, Policy: p}}
	start = time.Now()
	resp, err := client.Do(req.WithContext(ctx))
	rep.endWait()
	if err != nil {
		if file != nil {
			file.abandon()
		}
		if e := interrupted(); e != nil {
			return e
		}
		cause := failure(err)
		why := cause
		fields := []any{"method", req.Method, "url", target}
		var re *retry.Error
		if errors.As(err, &re) && re.Err != nil {
			cause = failure(re.Err)
			why = fmt.Sprintf("no response after %s in %s: %s", plural(re.Attempts, "attempt"), fmtWait(time.Since(start)), cause)
			fields = append(fields, "attempts", re.Attempts, "reason", re.Reason.String())
		}
		fields = append(fields, "elapsed_ms", elapsed(), "error", cause)
		return rep.fail(exitTransport, fmt.Sprintf("%s %s: %s", req.Method, target, why), "no response", fields...)
	}
	defer resp.Body.Close()
	attempts := retryhttp.Attempts(resp)
	if pf.verbose {
		names := make([]string, 0, len(resp.Header))
		for k := range resp.Header {
			names = append(names, k)
		}
		slices.Sort(names)
		rep.infof("< %s %s", resp.Proto, resp.Status)
		for _, k := range names {
			for _, v := range resp.Header[k] {
				rep.infof("< %s: %s", k, v)
			}
		}
	}

	// The body: to the file, or to stdout (escaped on a terminal).
	var w io.Writer = stdout
	var esc *escapingWriter
	switch {
	case file != nil:
		if err := file.truncate(); err != nil {
			file.f.Close()
			return rep.fail(1, fmt.Sprintf("-o %q: %v", out, err), "cannot write the output file", "file", out, "error", err.Error())
		}
		w = file.f
	case isTerminal(stdout):
		esc = &escapingWriter{w: stdout}
		w = esc
	}
	var bodyTimedOut atomic.Bool
	if p.AttemptTimeout > 0 {
		left := time.Until(clock.started().Add(p.AttemptTimeout))
		t := time.AfterFunc(left, func() {
			bodyTimedOut.Store(true)
			cancel()
		})
		defer t.Stop()
	}
	dst := &recordingWriter{w: w}
	n, copyErr := io.Copy(dst, resp.Body)
	if esc != nil && copyErr == nil {
		copyErr = esc.Close()
		dst.err = copyErr
	}
	if file != nil {
		if err := file.f.Close(); err != nil && copyErr == nil {
			return rep.fail(1, fmt.Sprintf("-o %q: %v", out, err), "cannot write the output file", "file", out, "error", err.Error())
		}
	}
	if dst.err != nil {
		// A local failure (disk full, closed stdout): exit 1, not 7, which
		// says the network failed.
		where := "stdout"
		if file != nil {
			where = fmt.Sprintf("-o %q", out)
		}
		return rep.fail(1, fmt.Sprintf("%s %s: writing the body to %s: %v (%d bytes written)", req.Method, target, where, dst.err, n),
			"cannot write the body", "method", req.Method, "url", target, "status", resp.StatusCode, "attempts", attempts,
			"output", where, "error", dst.err.Error(), "bytes", n)
	}
	if copyErr != nil {
		if e := interrupted(); e != nil {
			return e
		}
		why := copyErr.Error()
		if bodyTimedOut.Load() {
			why = fmt.Sprintf("--attempt-timeout %s passed", p.AttemptTimeout)
		}
		return rep.fail(exitTransport, fmt.Sprintf("%s %s: %s %s: reading the body: %s (%d bytes written)",
			req.Method, target, resp.Proto, resp.Status, why, n),
			"incomplete body", "method", req.Method, "url", target, "status", resp.StatusCode, "attempts", attempts,
			"elapsed_ms", elapsed(), "error", why, "bytes", n)
	}
	exit := 0
	if resp.StatusCode >= 400 {
		exit = exitHTTPStatus
	}
	fields := []any{"method", req.Method, "url", target, "status", resp.StatusCode, "status_line", resp.Proto + " " + resp.Status,
		"attempts", attempts, "elapsed_ms", elapsed()}
	if r := rep.lastReason(); r != 0 {
		fields = append(fields, "reason", r.String())
	}
	rep.result(slog.LevelInfo, fmt.Sprintf("%s %s (%s in %s)", resp.Proto, resp.Status, plural(attempts, "attempt"), fmtWait(time.Since(start))),
		"response", append(fields, "exit_code", exit)...)
	if attempts == 1 && retryhttp.DefaultRetryStatus(resp.StatusCode) && !idempotentMethod(req.Method) &&
		!hasIdempotencyKey(req.Header) {
		rep.infof("not retried: %s without an idempotency key may have been processed (--idempotency-key KEY or auto allows retries)", req.Method)
	}
	if exit != 0 {
		return &exitError{code: exit}
	}
	return nil
}

// recordingWriter passes writes on to w and keeps the first error, so that
// a failure to write the body is told from a failure to read it.
type recordingWriter struct {
	w   io.Writer
	err error
}

func (r *recordingWriter) Write(b []byte) (int, error) {
	n, err := r.w.Write(b)
	if err != nil && r.err == nil {
		r.err = err
	}
	return n, err
}

// idempotentMethod reports whether the transport retries method without an
// idempotency key (RFC 9110 9.2.2, as retryhttp does).
func idempotentMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// hasIdempotencyKey reports whether h carries an Idempotency-Key or
// X-Idempotency-Key header, even an empty one: the transport (and net/http)
// retry a request that has one.
func hasIdempotencyKey(h http.Header) bool {
	_, a := h["Idempotency-Key"]
	_, b := h["X-Idempotency-Key"]
	return a || b
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// validHeaderName reports whether s is an HTTP field name (an RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// validHeaderValue reports whether s may be sent as a field value: no
// control characters other than tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
