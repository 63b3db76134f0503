package retryhttp

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzRedact: redact never panics, and what it prints, read back as a URL,
// has no password but "xxxxx", no query value but "xxx", and no fragment.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"http://u:p@127.0.0.1/x?token=s3cret&a=1#frag", "https://127.0.0.1/?a&b=c", "http://u@h/", "http://h/p;q?x=%zz",
		"http:opaque?a=b", "//u:p@h", "http://[::1]:80/?=v"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := url.Parse(s)
		if err != nil {
			return
		}
		out := redact(u)
		r, err := url.Parse(out)
		if err != nil {
			return // not a URL any more: nothing of it reads as a password or query value
		}
		if p, has := r.User.Password(); has && p != "xxxxx" {
			t.Fatalf("redact(%q) = %q: password %q", s, out, p)
		}
		if r.Fragment != "" {
			t.Fatalf("redact(%q) = %q: fragment %q", s, out, r.Fragment)
		}
		for _, part := range strings.Split(r.RawQuery, "&") {
			if _, v, ok := strings.Cut(part, "="); ok && v != "xxx" {
				t.Fatalf("redact(%q) = %q: query value %q", s, out, v)
			}
		}
		if _, has := u.User.Password(); has && r.User == nil && u.Opaque == "" {
			t.Fatalf("redact(%q) = %q: the user info is gone or moved", s, out)
		}
	})
}
