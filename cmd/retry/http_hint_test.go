package main_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
)

// TestHTTPNamesTheHint: the retry line names the server hint that set the
// wait, in the text and json formats, and says nothing when the policy's
// own wait was longer.
func TestHTTPNamesTheHint(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 1 {
			w.Header().Set("retry-after-ms", "200")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()

	r := runRetry(t, "", args(fast, []string{"http", srv.URL})...)
	if r.code != 0 || !regexp.MustCompile(`attempt 1/10 failed \(429 Too Many Requests\); retrying in 2[0-2]\dms \(retry-after-ms 200\)\n`).MatchString(r.stderr) {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}

	r = runRetry(t, "", args(fast, []string{"http", "--log-format", "json", srv.URL})...)
	var ev map[string]any
	line, _, _ := strings.Cut(r.stderr, "\n")
	if err := json.Unmarshal([]byte(line), &ev); err != nil || ev["msg"] != "retrying" || ev["hint"] != "retry-after-ms 200" {
		t.Errorf("%v: %s", err, r.stderr)
	}

	// The policy's wait (1 s) is longer than the hint's: no hint named.
	r = runRetry(t, "", "http", "--initial", "1s", "--jitter", "none", srv.URL)
	if r.code != 0 || !strings.Contains(r.stderr, "attempt 1/10 failed (429 Too Many Requests); retrying in 1s\n") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}
