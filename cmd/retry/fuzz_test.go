package main

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseJitter: any --jitter value either parses into a jitter that
// passes Policy validation or gives a one-line error; never a panic.
func FuzzParseJitter(f *testing.F) {
	for _, s := range []string{"none", "full", "equal", "decorrelated", "additive", "additive:250ms",
		"additive:-1s", "proportional:0.2", "proportional:2", "proportional:NaN", "", ":", "full:1s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		j, err := parseJitter(s)
		if err != nil {
			if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") {
				t.Fatalf("parseJitter(%q): error %q is not one line", s, msg)
			}
			return
		}
		if j.String() == "invalid" {
			t.Fatalf("parseJitter(%q) accepted an invalid jitter", s)
		}
	})
}

// FuzzParseExitCodes: --on-exit either yields codes in 1..255 or a one-line
// error.
func FuzzParseExitCodes(f *testing.F) {
	for _, s := range []string{"1", "75,100-110", "0", "256", "5-3", "1-255", "a", ",", "-", "1,,2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		codes, err := parseExitCodes(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("parseExitCodes(%q): multi-line error", s)
			}
			return
		}
		for c := range codes {
			if c < 1 || c > 255 {
				t.Fatalf("parseExitCodes(%q) accepted code %d", s, c)
			}
		}
	})
}

// FuzzHTTPRequest: retry http's URL, -X, -H and --idempotency-key either
// build a request whose every header name is a token and every value free
// of control characters, for a loopback or any http(s) host with a port in
// 0..65535, or give a one-line usage error; never a panic.
func FuzzHTTPRequest(f *testing.F) {
	f.Add("http://127.0.0.1:8080/x", "", "Content-Type: application/json", "auto", true)
	f.Add("https://[::1]:99999/", "POST", "X: a\x00b", "", false)
	f.Add("http://127.0.0.1/", "GET ", "Host: example", "k\r\n", false)
	f.Add("ftp://h/", "", ": v", "", true)
	f.Add("http://h:+1/", "", "Na me: v", "", false)
	f.Fuzz(func(t *testing.T, rawURL, method, header, key string, hasData bool) {
		o := &httpOptions{method: method, headers: []string{header}, key: key, hasData: hasData, data: "d"}
		req, err := o.request(rawURL)
		if err != nil {
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != exitUsage || ee.msg == "" || strings.ContainsAny(ee.msg, "\n\r") {
				t.Fatalf("request(%q, -X %q, -H %q, key %q): error %#v, want a one-line usage error", rawURL, method, header, key, err)
			}
			return
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" || req.URL.Host == "" {
			t.Fatalf("request(%q) accepted URL %v", rawURL, req.URL)
		}
		if p := req.URL.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 65535 {
				t.Fatalf("request(%q) accepted port %q", rawURL, p)
			}
		}
		for name, vs := range req.Header {
			if !validHeaderName(name) {
				t.Fatalf("-H %q: header name %q", header, name)
			}
			for _, v := range vs {
				if !validHeaderValue(v) {
					t.Fatalf("-H %q, key %q: header value %q", header, key, v)
				}
			}
		}
		if !validHeaderValue(req.Host) {
			t.Fatalf("-H %q: Host %q", header, req.Host)
		}
	})
}
