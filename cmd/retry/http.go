package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/spf13/cobra"
)

// httpOptions holds the flags of `retry http`.
type httpOptions struct {
	method, data, dataFile, key, out string
	headers                          []string
}

func newHTTPCmd() *cobra.Command {
	o := &httpOptions{}
	cmd := &cobra.Command{
		Use:   "http [policy flags] [-X METHOD] [-H 'Name: value']... [-d DATA | --data-file FILE] [--idempotency-key KEY|auto] [-o FILE] URL",
		Short: "Send an HTTP request, retrying 408, 429, 5xx and connection failures",
		Long: `http sends one HTTP request through the retryhttp transport: the response body goes
to stdout (or -o FILE), the status and the retries to stderr. Retry-After is honoured.

GET, HEAD, OPTIONS, TRACE, PUT and DELETE are retried. POST, PATCH and other
non-idempotent requests are sent once unless they carry an idempotency key
(--idempotency-key KEY, or auto for a random UUIDv4 kept for every attempt), or
the connection could not be made, or the server answered 429.

Exit statuses: 0 for a final 1xx/2xx/3xx response, 22 for a final status of 400 or
more, 7 when no response arrived (connection refused, timeout, ...), 2 for bad
input, 130/143 when interrupted.`,
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
	f.StringVarP(&o.data, "data", "d", "", "request body")
	f.StringVar(&o.dataFile, "data-file", "", "read the request body from this file")
	f.StringVar(&o.key, "idempotency-key", "", "send Idempotency-Key: KEY so that POST/PATCH may be retried; auto generates a UUIDv4")
	f.StringVarP(&o.out, "output", "o", "", "write the response body to this file instead of stdout")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		p, err := pf.policy()
		if err != nil {
			return err
		}
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
	if o.data != "" && o.dataFile != "" {
		return nil, usagef("-d and --data-file exclude each other")
	}
	var body []byte
	hasBody := false
	if o.data != "" {
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
		value = strings.TrimSpace(value)
		if strings.EqualFold(name, "Host") {
			req.Host = value
			continue
		}
		req.Header.Add(name, value)
	}
	if hasBody && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded") // as curl -d does
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

// doHTTP sends req through a retryhttp.Transport and writes the body to
// out (a file name) or stdout.
func doHTTP(ctx context.Context, p retry.Policy, pf *policyFlags, req *http.Request, out string, stdout, stderr io.Writer) error {
	rep := newReporter(stderr, pf)
	defer rep.endWait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	gotSig := make(chan os.Signal, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case s := <-sigs:
			gotSig <- s
			cancel()
		case <-done:
		}
	}()

	p.Observer = retry.ObserverFunc(func(_ context.Context, ev retry.Event) {
		if ev.Kind == retry.EventRetry {
			rep.retrying(ev, failure(ev.Err))
		}
	})
	rep.infof("%s", describe(p))
	rep.infof("%s %s", req.Method, req.URL.Redacted())
	client := &http.Client{Transport: &retryhttp.Transport{Policy: p}}
	start := time.Now()
	resp, err := client.Do(req.WithContext(ctx))
	rep.endWait()
	if err != nil {
		var sig os.Signal
		if ctx.Err() != nil {
			sig = <-gotSig
		}
		if sig != nil {
			code := exitSIGINT
			if sig == syscall.SIGTERM {
				code = exitSIGTERM
			}
			rep.noticef("interrupted; not retrying")
			return &exitError{code: code}
		}
		why := failure(err)
		var re *retry.Error
		if errors.As(err, &re) && re.Err != nil {
			why = fmt.Sprintf("no response after %d attempt(s) in %s: %s", re.Attempts, fmtWait(re.Elapsed), failure(re.Err))
		}
		return &exitError{code: exitTransport, msg: fmt.Sprintf("%s %s: %s", req.Method, req.URL.Redacted(), why)}
	}
	defer resp.Body.Close()
	attempts := retryhttp.Attempts(resp)
	w := stdout
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			return &exitError{code: 1, msg: fmt.Sprintf("-o %q: %v", out, errors.Unwrap(err))}
		}
		defer f.Close()
		w = f
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return &exitError{code: 1, msg: fmt.Sprintf("reading the response body: %v", err)}
	}
	if out != "" {
		if err := w.(*os.File).Close(); err != nil {
			return &exitError{code: 1, msg: fmt.Sprintf("-o %q: %v", out, err)}
		}
	}
	plural := "s"
	if attempts == 1 {
		plural = ""
	}
	rep.noticef("%s %s (%d attempt%s in %s)", resp.Proto, resp.Status, attempts, plural, fmtWait(time.Since(start)))
	if resp.StatusCode >= 400 {
		return &exitError{code: exitHTTPStatus}
	}
	return nil
}
