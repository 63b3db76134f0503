package main_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// recorder is a loopback server that answers 200 and records each
// request's method and body.
type recorder struct {
	mu    sync.Mutex
	reqs  []string
	bodyN []int
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, r.Method)
	rc.bodyN = append(rc.bodyN, len(b))
	rc.mu.Unlock()
	w.Write([]byte("ok\n"))
}

func (rc *recorder) methods() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.reqs...)
}

// -o /dev/null (as with curl) discards the body: a file that cannot be
// truncated (a device, a pipe) is written as it is, not an error after the
// request was sent.
func TestHTTPOutputDevNull(t *testing.T) {
	srv := httptest.NewServer(&recorder{})
	defer srv.Close()
	r := runRetry(t, "", args(fast, []string{"http", "-o", os.DevNull, srv.URL})...)
	if r.code != 0 || strings.Contains(r.stderr, "-o") {
		t.Errorf("-o %s: exit %d, stderr %q; want 0", os.DevNull, r.code, r.stderr)
	}
}

// Bad input that only the transport would notice is refused up front: exit
// 125, one line, nothing sent, no retries.
func TestHTTPBadInputCaughtUpFront(t *testing.T) {
	rc := &recorder{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"http", "--idempotency-key", "a\nb", srv.URL}, "--idempotency-key"},
		{[]string{"http", "-X", "POST", "--idempotency-key", "a\x01b", srv.URL}, "--idempotency-key"},
		{[]string{"http", "http://127.0.0.1:99999/"}, `"99999"`},
		{[]string{"http", "http://127.0.0.1:080080/"}, `"080080"`},
		{[]string{"http", "-d", "@body.json", srv.URL}, "use --data-file body.json"}, // curl would read the file
		{[]string{"http", "-d", "@", srv.URL}, "use --data-file FILE"},
		{[]string{"http", "-d", "@-", srv.URL}, "use --data-file /dev/stdin"},                      // curl: standard input
		{[]string{"http", "--idempotency-key", "", "-X", "POST", srv.URL}, `--idempotency-key ""`}, // no key at all
		{[]string{"http", "--idempotency-key=", "-d", "x", srv.URL}, `--idempotency-key ""`},
	} {
		r := runRetry(t, "", args(fast, c.args)...)
		if r.code != 125 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("retry %q: exit %d, stderr %q; want 125 and one line naming %s", c.args, r.code, r.stderr, c.want)
		}
	}
	if m := rc.methods(); len(m) != 0 {
		t.Errorf("requests sent: %v", m)
	}
}

// An empty -d sends a POST with an empty body, as curl does; it is not dropped
// into a GET.
func TestHTTPEmptyData(t *testing.T) {
	rc := &recorder{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	r := runRetry(t, "", args(fast, []string{"http", "-d", "", srv.URL})...)
	if m := rc.methods(); r.code != 0 || len(m) != 1 || m[0] != "POST" {
		t.Errorf("-d '': exit %d, methods %v, stderr %q; want one POST", r.code, m, r.stderr)
	}
}

// schedule with an absurd number of attempts is refused with a usage error
// instead of trying to hold every row in memory (the runtime's "out of
// memory" crash).
func TestScheduleTooManyRows(t *testing.T) {
	for _, a := range [][]string{
		{"schedule", "--attempts", "1000000000", "--samples", "100"},
		{"schedule", "--attempts", "2147483647", "--format", "json"},
	} {
		r := runRetry(t, "", a...)
		if r.code != 125 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "--attempts") {
			t.Errorf("retry %q: exit %d, stdout %d bytes, stderr %.300q; want 125 and one line naming --attempts", a, r.code, len(r.stdout), r.stderr)
		}
	}
	// A large limit that --max-elapsed cuts short is fine.
	r := runRetry(t, "", "schedule", "--attempts", "1000000000", "--max-elapsed", "1m", "--jitter", "none")
	if r.code != 0 || !strings.Contains(r.stdout, "cumulative max") {
		t.Errorf("--max-elapsed 1m: exit %d, stderr %q", r.code, r.stderr)
	}
}

// simulate refuses an --out or --csv file that cannot be written before it
// simulates anything: exit 125, one line, nothing on stdout.
func TestSimulateOutputCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	for _, a := range [][]string{
		{"--out", filepath.Join(dir, "missing", "h.png")},
		{"--csv", filepath.Join(dir, "missing", "h.csv")},
		{"--out", dir + "/"},
		{"--csv", dir},
	} {
		r := runRetry(t, "", append([]string{"simulate", "--clients", "100"}, a...)...)
		if r.code != 125 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, a[0]) {
			t.Errorf("simulate %q: exit %d, stdout %q, stderr %q; want 125, no table, one line naming %s", a, r.code, r.stdout, r.stderr, a[0])
		}
	}
	// A file that existed is left alone when the run is refused, and one
	// that the refused run would have created does not appear.
	existing := filepath.Join(dir, "keep.csv")
	os.WriteFile(existing, []byte("keep"), 0o644)
	created := filepath.Join(dir, "new.png")
	r := runRetry(t, "", "simulate", "--clients", "0", "--csv", existing, "--out", created)
	if r.code != 125 {
		t.Errorf("--clients 0: exit %d", r.code)
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep" {
		t.Errorf("existing --csv file now %q: want it untouched", b)
	}
	if _, err := os.Stat(created); !os.IsNotExist(err) {
		t.Errorf("refused run left --out %s behind: %v", created, err)
	}
	// Refused by the simulator (its memory estimate) after the files were
	// opened: the same.
	r = runRetry(t, "", "simulate", "--clients", "100000000", "--max-memory", "1MiB", "--csv", existing, "--out", created)
	if r.code != 125 || !strings.Contains(r.stderr, "--max-memory") {
		t.Errorf("over --max-memory: exit %d, stderr %q", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep" {
		t.Errorf("existing --csv file now %q: want it untouched", b)
	}
	if _, err := os.Stat(created); !os.IsNotExist(err) {
		t.Errorf("refused run left --out %s behind: %v", created, err)
	}
}

// --compare takes a bounded list: every strategy's load series is kept
// until the end, outside --max-memory.
func TestSimulateCompareBounded(t *testing.T) {
	var names []string
	for i := 1; i <= 17; i++ {
		names = append(names, "additive:"+strings.Repeat("1", i)+"ms")
	}
	r := runRetry(t, "", "simulate", "--clients", "10", "--compare", strings.Join(names, ","))
	if r.code != 125 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "--compare") {
		t.Errorf("17 strategies: exit %d, stdout %q, stderr %q; want 125 naming --compare", r.code, r.stdout, r.stderr)
	}
}

// A body that cannot be written locally (disk full) is a local error, exit
// 1 as documented, not 7 (no response, or its body ended early).
func TestHTTPWriteErrorIsLocal(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	srv := httptest.NewServer(&recorder{})
	defer srv.Close()
	r := runRetry(t, "", args(fast, []string{"http", "-o", "/dev/full", srv.URL})...)
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, `-o "/dev/full"`) {
		t.Errorf("-o /dev/full: exit %d, stderr %q; want 1 naming -o", r.code, r.stderr)
	}
}
