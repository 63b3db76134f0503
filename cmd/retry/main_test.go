package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// retryBin is the binary under test, built on first use by bin (fuzz
// workers and runs of other tests never build it).
var (
	retryBin   string
	buildOnce  sync.Once
	buildErr   error
	binTempDir string
)

// bin returns the path of the retry binary, building it once.
func bin(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binTempDir, buildErr = os.MkdirTemp("", "retry-cli-test")
		if buildErr != nil {
			return
		}
		retryBin = filepath.Join(binTempDir, "retry")
		if out, err := exec.Command("go", "build", "-ldflags", "-X main.killGraceOverride="+testKillGrace.String(), "-o", retryBin, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return retryBin
}

func TestMain(m *testing.M) {
	// The retry binaries the tests start inherit an ignored SIGINT or
	// SIGHUP, which retry then leaves ignored, as nohup asks: when this
	// process was started so (a background job of a shell without job
	// control), it handles them itself, so that its children start with
	// the default disposition and the signal tests mean what they say.
	for _, s := range []os.Signal{syscall.SIGINT, syscall.SIGHUP} {
		if signal.Ignored(s) {
			signal.Notify(make(chan os.Signal, 1), s)
		}
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	if binTempDir != "" {
		os.RemoveAll(binTempDir)
	}
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// runRetry runs the binary with args and stdin, within 20 s.
func runRetry(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin(t), args...)
	cmd.Dir = t.TempDir()
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	start := time.Now()
	err := cmd.Run()
	r := result{o.String(), e.String(), 0, time.Since(start)}
	var xe *exec.ExitError
	switch {
	case errors.As(err, &xe):
		r.code = xe.ExitCode()
	case err != nil:
		t.Fatalf("retry %q: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("retry %q did not finish in 20s", args)
	}
	return r
}

// testKillGrace is the SIGTERM-to-SIGKILL grace period of the binary
// the tests build (2 s in a release build; see killGrace).
const testKillGrace = 300 * time.Millisecond

var fast = []string{"--initial", "10ms", "--jitter", "none"}

func args(a ...[]string) []string {
	var out []string
	for _, x := range a {
		out = append(out, x...)
	}
	return out
}

func TestCommandRetriesUntilSuccess(t *testing.T) {
	dir := t.TempDir()
	counter := filepath.Join(dir, "n")
	script := `n=$(cat "$1" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$1"; echo "try $n"; [ $n -ge 3 ]`
	r := runRetry(t, "", args(fast, []string{"--", "sh", "-c", script, "sh", counter})...)
	if r.code != 0 || r.stdout != "try 1\ntry 2\ntry 3\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	want := "retry: attempt 1/10 failed (exit 1); retrying in 10ms\nretry: attempt 2/10 failed (exit 1); retrying in 20ms\n"
	if r.stderr != want {
		t.Errorf("stderr %q, want %q (plain lines when not a terminal)", r.stderr, want)
	}
}

func TestCommandLastExitStatus(t *testing.T) {
	r := runRetry(t, "", args(fast, []string{"--attempts", "3", "--", "sh", "-c", "echo out; echo err >&2; exit 3"})...)
	if r.code != 3 || r.stdout != "out\nout\nout\n" {
		t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
	}
	if strings.Count(r.stderr, "err\n") != 3 || !strings.Contains(r.stderr, "giving up after 3 attempts") {
		t.Errorf("stderr %q", r.stderr)
	}
	// --quiet: only the command's own output.
	r = runRetry(t, "", args(fast, []string{"-q", "--attempts", "2", "--", "sh", "-c", "echo err >&2; exit 4"})...)
	if r.code != 4 || r.stderr != "err\nerr\n" {
		t.Errorf("quiet: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestCommandOnExit(t *testing.T) {
	r := runRetry(t, "", args(fast, []string{"--on-exit", "4,10-20", "--", "sh", "-c", "echo x; exit 3"})...)
	if r.code != 3 || r.stdout != "x\n" {
		t.Errorf("unlisted code: exit %d, stdout %q (want one attempt)", r.code, r.stdout)
	}
	// 130 means "interrupted" (a command that handled Ctrl-C) and ends the
	// retries, unless --on-exit lists it.
	r = runRetry(t, "", args(fast, []string{"--attempts", "3", "--", "sh", "-c", "echo x; exit 130"})...)
	if r.code != 130 || r.stdout != "x\n" || !strings.Contains(r.stderr, "attempt 1 was interrupted by SIGINT; not retrying") {
		t.Errorf("exit 130: exit %d, stdout %q, stderr %q (want one attempt)", r.code, r.stdout, r.stderr)
	}
	r = runRetry(t, "", args(fast, []string{"--on-exit", "130", "--attempts", "2", "--", "sh", "-c", "echo x; exit 130"})...)
	if r.code != 130 || r.stdout != "x\nx\n" {
		t.Errorf("--on-exit 130: exit %d, stdout %q (want two attempts)", r.code, r.stdout)
	}
	r = runRetry(t, "", args(fast, []string{"--on-exit", "4,10-20", "--attempts", "3", "--", "sh", "-c", "echo x; exit 15"})...)
	if r.code != 15 || r.stdout != "x\nx\nx\n" {
		t.Errorf("listed code: exit %d, stdout %q (want three attempts)", r.code, r.stdout)
	}
}

func TestCommandStdinFirstAttemptOnly(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "in")
	r := runRetry(t, "payload\n", args(fast, []string{"--attempts", "3", "--", "sh", "-c", `cat >> "$1"; echo . >> "$1"; exit 1`, "sh", out})...)
	if r.code != 1 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	b, _ := os.ReadFile(out)
	if string(b) != "payload\n.\n.\n.\n" {
		t.Errorf("attempts read %q: want the input in the first attempt only", b)
	}
}

func TestCommandNotFound(t *testing.T) {
	r := runRetry(t, "", args(fast, []string{"--", "/nonexistent/tool"})...)
	if r.code != 127 || strings.Count(r.stderr, "\n") != 1 || strings.Contains(r.stderr, "retrying") {
		t.Errorf("exit %d, stderr %q: want 127, one line, no retries", r.code, r.stderr)
	}
}

// startRetry starts the binary and returns a function that waits for a
// line containing s on stderr.
func startRetry(t *testing.T, a ...string) (*exec.Cmd, func(s string), func() result) {
	t.Helper()
	cmd := exec.Command(bin(t), a...)
	var o bytes.Buffer
	cmd.Stdout = &o
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	var mu sync.Mutex
	var errBuf strings.Builder
	seen := make(chan string, 100)
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := pr.Read(b)
			mu.Lock()
			errBuf.Write(b[:n])
			s := errBuf.String()
			mu.Unlock()
			select {
			case seen <- s:
			default:
			}
			if err != nil {
				close(seen)
				return
			}
		}
	}()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitFor := func(s string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case got, ok := <-seen:
				if strings.Contains(got, s) {
					return
				}
				if !ok {
					t.Fatalf("stderr ended without %q: %q", s, got)
				}
			case <-deadline:
				cmd.Process.Kill()
				t.Fatalf("no %q on stderr within 10s", s)
			}
		}
	}
	finish := func() result {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatal("retry did not exit within 10s")
		}
		pw.Close()
		for range seen {
		}
		mu.Lock()
		defer mu.Unlock()
		r := result{stdout: o.String(), stderr: errBuf.String(), took: time.Since(start)}
		var xe *exec.ExitError
		if errors.As(err, &xe) {
			r.code = xe.ExitCode()
		}
		return r
	}
	return cmd, waitFor, finish
}

func TestSignalDuringWait(t *testing.T) {
	for _, c := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(c.sig.String(), func(t *testing.T) {
			cmd, waitFor, finish := startRetry(t, "--initial", "30s", "--jitter", "none", "--", "sh", "-c", "exit 1")
			waitFor("retrying in 30s")
			sent := time.Now()
			cmd.Process.Signal(c.sig)
			r := finish()
			if r.code != c.code {
				t.Errorf("exit %d, want %d; stderr %q", r.code, c.code, r.stderr)
			}
			if took := time.Since(sent); took > 5*time.Second { // at once, with room for a loaded machine
				t.Errorf("took %v to exit after the signal", took)
			}
		})
	}
}

func TestSignalForwardedToCommand(t *testing.T) {
	cmd, waitFor, finish := startRetry(t, "-v", "--initial", "10ms", "--", "sleep", "30")
	waitFor("attempt 1: running sleep 30")
	time.Sleep(50 * time.Millisecond) // let the child start sleeping
	cmd.Process.Signal(syscall.SIGTERM)
	r := finish()
	if r.code != 128+int(syscall.SIGTERM) || strings.Contains(r.stderr, "retrying") {
		t.Errorf("exit %d, stderr %q: want 143 (child killed by SIGTERM) and no retry", r.code, r.stderr)
	}
	if r.took > 5*time.Second {
		t.Errorf("took %v: the child did not get the signal", r.took)
	}
}

func TestBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus", "--", "true"}, "--bogus"},
		{[]string{"true"}, `"true"`},
		{[]string{}, "no command"},
		{[]string{"--"}, "no command"},
		{[]string{"--initial", "5x", "--", "true"}, `"5x"`},
		{[]string{"--multiplier", "0.5", "--", "true"}, "--multiplier 0.5"},
		{[]string{"--attempts", "0", "--", "true"}, "--attempts 0"},
		{[]string{"--jitter", "wobbly", "--", "true"}, `--jitter "wobbly"`},
		{[]string{"--jitter", "proportional:2", "--", "true"}, `--jitter "proportional:2"`},
		{[]string{"--preset", "azure", "--", "true"}, `--preset "azure"`},
		{[]string{"--initial", "5s", "--max-delay", "1s", "--", "true"}, "--max-delay 1s is below --initial 5s"},
		{[]string{"--on-exit", "0", "--", "true"}, `--on-exit "0"`},
		{[]string{"--log-format", "xml", "--", "true"}, `--log-format "xml"`},
		{[]string{"http", "example.com/x"}, `URL "example.com/x"`},
		{[]string{"http", "ftp://127.0.0.1/x"}, `URL "ftp://127.0.0.1/x"`},
		{[]string{"http", "--data-file", "/nonexistent/body", "http://127.0.0.1:1/"}, `--data-file "/nonexistent/body"`},
		{[]string{"http", "-H", "NoColon", "http://127.0.0.1:1/"}, `-H "NoColon"`},
		{[]string{"http"}, "one URL"},
		{[]string{"schedule", "--format", "yaml"}, `--format "yaml"`},
		{[]string{"schedule", "--samples", "0"}, "--samples 0"},
		{[]string{"schedule", "--max-delay", "-1s"}, "--max-delay -1s"},
		{[]string{"schedule", "--attempt-timeout", "1s"}, "--attempt-timeout"}, // schedule runs nothing
		{[]string{"http", "-H", "Bad(Name): x", "http://127.0.0.1:1/"}, `"Bad(Name)" is not a valid header name`},
		{[]string{"http", "-H", "X-A: a\x01b", "http://127.0.0.1:1/"}, "control character"},
		{[]string{"http", "-o", "/nonexistent/dir/out", "http://127.0.0.1:1/"}, `-o "/nonexistent/dir/out"`},
		{[]string{"help", "nosuch"}, `unknown command "nosuch"`},
		{[]string{"completion", "nosuch"}, `unknown shell "nosuch"`},
		{[]string{"completion"}, "want a shell"},
		{[]string{"completion", "bash", "extra"}, `unexpected argument "extra"`},
		{[]string{"simulate", "--clients", "0"}, "--clients 0"},
		{[]string{"simulate", "--initial", "5s", "--max-delay", "1s"}, "--max-delay 1s"},
		{[]string{"schedule", "extra"}, `unexpected argument "extra"`},
		{[]string{"simulate", "extra"}, `unexpected argument "extra"`},
		{[]string{"--version", "extra"}, "--version takes no arguments"},
		{[]string{"--version", "--", "true"}, "--version takes no arguments"},
		{[]string{"--multiplier", "Inf", "--", "true"}, "--multiplier +Inf"},
		{[]string{"schedule", "--multiplier", "+inf"}, "--multiplier +Inf"},
		{[]string{"simulate", "--multiplier", "Inf"}, "--multiplier +Inf"},
	} {
		r := runRetry(t, "", c.args...)
		if r.code != 125 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 ||
			!strings.HasPrefix(r.stderr, "retry: ") || !strings.Contains(r.stderr, c.want) {
			t.Errorf("retry %q: exit %d, stdout %q, stderr %q; want exit 125 and one line naming %s", c.args, r.code, r.stdout, r.stderr, c.want)
		}
	}
}

func TestSchedule(t *testing.T) {
	r := runRetry(t, "", "schedule", "--jitter", "none", "--initial", "1s", "--multiplier", "2", "--max-delay", "4s", "--attempts", "5")
	want := `  retry  min  max  sample  cumulative max
      1   1s   1s      1s              1s
      2   2s   2s      2s              3s
      3   4s   4s      4s              7s
      4   4s   4s      4s             11s
`
	if r.code != 0 || r.stdout != want {
		t.Errorf("exit %d, table:\n%s\nwant:\n%s", r.code, r.stdout, want)
	}
	// Explicit flags override the preset: aws is 3 attempts, full jitter.
	r = runRetry(t, "", "schedule", "--preset", "aws", "--attempts", "4", "--samples", "3", "--seed", "7", "--format", "json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 3 {
		t.Fatalf("exit %d, %v, json %s", r.code, err, r.stdout)
	}
	cum := 0.0
	for i, row := range rows {
		lo, hi, s := row["min_ms"].(float64), row["max_ms"].(float64), row["sample_ms"].(float64)
		cum += hi
		if row["retry"] != float64(i+1) || lo != 0 || hi != 50*float64(int(1)<<i) || s < lo || s > hi ||
			row["cumulative_max_ms"] != cum || len(row["samples_ms"].([]any)) != 3 {
			t.Errorf("row %d: %v", i, row)
		}
	}
	again := runRetry(t, "", "schedule", "--preset", "aws", "--attempts", "4", "--samples", "3", "--seed", "7", "--format", "json")
	other := runRetry(t, "", "schedule", "--preset", "aws", "--attempts", "4", "--samples", "3", "--seed", "8", "--format", "json")
	if again.stdout != r.stdout || other.stdout == r.stdout {
		t.Error("--seed: the same seed must give the same samples, another seed others")
	}
}

// flaky is a loopback server that fails the first `fail` requests with
// status and then answers 200, recording every request.
type flaky struct {
	mu     sync.Mutex
	fail   int
	status int
	bodies []string
	keys   []string
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies = append(f.bodies, string(b))
	f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
	n := len(f.bodies)
	f.mu.Unlock()
	if n <= f.fail {
		http.Error(w, "try later", f.status)
		return
	}
	fmt.Fprintf(w, "ok %s %s", r.Method, b)
}

func (f *flaky) snapshot() ([]string, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...), append([]string(nil), f.keys...)
}

func TestHTTPGetRetried(t *testing.T) {
	f := &flaky{fail: 2, status: http.StatusServiceUnavailable}
	srv := httptest.NewServer(f)
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "body")
	r := runRetry(t, "", args(fast, []string{"http", "-H", "X-Test: 1", "-o", out, srv.URL + "/x"})...)
	b, _ := os.ReadFile(out)
	if r.code != 0 || string(b) != "ok GET " || r.stdout != "" {
		t.Fatalf("exit %d, file %q, stdout %q, stderr %q", r.code, b, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "attempt 1/10 failed (503 Service Unavailable); retrying in 10ms") ||
		!strings.Contains(r.stderr, "200 OK (3 attempts") {
		t.Errorf("stderr %q", r.stderr)
	}
}

func TestHTTPPostWithoutKeySentOnce(t *testing.T) {
	f := &flaky{fail: 1, status: http.StatusServiceUnavailable}
	srv := httptest.NewServer(f)
	defer srv.Close()
	r := runRetry(t, "", args(fast, []string{"http", "-d", "amount=10", srv.URL})...)
	bodies, _ := f.snapshot()
	if r.code != 22 || len(bodies) != 1 || bodies[0] != "amount=10" {
		t.Errorf("exit %d, server saw %q, stderr %q: want one request and exit 22", r.code, bodies, r.stderr)
	}
	if !strings.Contains(r.stderr, "503 Service Unavailable (1 attempt") {
		t.Errorf("stderr %q", r.stderr)
	}
}

func TestHTTPPostWithAutoKeyRetried(t *testing.T) {
	f := &flaky{fail: 2, status: http.StatusBadGateway}
	srv := httptest.NewServer(f)
	defer srv.Close()
	r := runRetry(t, "", args(fast, []string{"http", "-X", "POST", "-d", `{"n":1}`, "--idempotency-key", "auto", srv.URL})...)
	bodies, keys := f.snapshot()
	if r.code != 0 || r.stdout != `ok POST {"n":1}` || len(bodies) != 3 {
		t.Fatalf("exit %d, stdout %q, %d requests, stderr %q", r.code, r.stdout, len(bodies), r.stderr)
	}
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	for i := range bodies {
		if bodies[i] != `{"n":1}` || keys[i] != keys[0] || !uuid.MatchString(keys[i]) {
			t.Errorf("request %d: body %q key %q (first key %q)", i, bodies[i], keys[i], keys[0])
		}
	}
	r2 := runRetry(t, "", "http", "--idempotency-key", "auto", "-d", "x", srv.URL)
	_, keys = f.snapshot()
	if r2.code != 0 || keys[len(keys)-1] == keys[0] {
		t.Errorf("a second run reused the key %q", keys[0])
	}
}

func TestHTTPExitCodes(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	r := runRetry(t, "", args(fast, []string{"http", srv.URL})...)
	if r.code != 22 || !strings.Contains(r.stdout, "404 page not found") || strings.Contains(r.stderr, "retrying") {
		t.Errorf("404: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	url := srv.URL
	srv.Close()
	r = runRetry(t, "", args(fast, []string{"http", "--attempts", "2", url})...)
	if r.code != 7 || !strings.Contains(r.stderr, "connection refused") || strings.Count(r.stderr, "\n") != 2 {
		t.Errorf("refused: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestHTTPJSONLog(t *testing.T) {
	f := &flaky{fail: 1, status: http.StatusTooManyRequests}
	srv := httptest.NewServer(f)
	defer srv.Close()
	r := runRetry(t, "", args(fast, []string{"http", "--log-format", "json", srv.URL})...)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if r.code != 0 || len(lines) != 2 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	var ev map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &ev); err != nil || ev["msg"] != "retrying" || ev["attempt"] != 1.0 ||
		ev["failure"] != "429 Too Many Requests" || ev["delay_ms"] != 10.0 {
		t.Errorf("%v: %s", err, lines[0])
	}
}

func TestDemo(t *testing.T) {
	r := runRetry(t, "", args(fast, []string{"demo"})...)
	if r.code != 0 || r.stdout != "hello from the retry demo server\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, s := range []string{"503 Service Unavailable", "429 Too Many Requests", "Retry-After: 1", "200 OK (3 attempts",
		"demo: running: retry http --initial 10ms --jitter none http://127.0.0.1:"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
	if r.took < time.Second || r.took > 5*time.Second {
		t.Errorf("took %v: Retry-After 1 must be honoured, and quickly", r.took)
	}
}

func TestVersionAndCompletion(t *testing.T) {
	r := runRetry(t, "", "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "retry devel (go") {
		t.Errorf("version: exit %d, %q", r.code, r.stdout)
	}
	if v := runRetry(t, "", "--version"); v.code != 0 || v.stdout != r.stdout {
		t.Errorf("--version: exit %d, %q; want %q as retry version prints", v.code, v.stdout, r.stdout)
	}
	r = runRetry(t, "", "completion", "bash")
	if r.code != 0 || !strings.Contains(r.stdout, "bash completion") {
		t.Errorf("completion: exit %d, %.200q", r.code, r.stdout)
	}
	r = runRetry(t, "", "http", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "--idempotency-key") || !strings.Contains(r.stdout, "22") ||
		!strings.Contains(r.stdout, "125 for bad input") {
		t.Errorf("help: exit %d", r.code)
	}
	if h := runRetry(t, "", "help", "http"); h.code != 0 || h.stdout != r.stdout {
		t.Errorf("help http: exit %d, %.100q", h.code, h.stdout)
	}
	// schedule lists only the flags that do something there.
	r = runRetry(t, "", "schedule", "--help")
	for _, f := range []string{"--attempt-timeout", "--verbose", "--quiet", "--log-format"} {
		if strings.Contains(r.stdout, f) {
			t.Errorf("schedule --help lists %s, which does nothing there", f)
		}
	}
	if !strings.Contains(r.stdout, "--max-elapsed") || !strings.Contains(r.stdout, "--jitter") {
		t.Errorf("schedule --help lacks its policy flags: %s", r.stdout)
	}
}

func TestHTTPSignalDuringWait(t *testing.T) {
	f := &flaky{fail: 1000, status: http.StatusServiceUnavailable}
	srv := httptest.NewServer(f)
	defer srv.Close()
	cmd, waitFor, finish := startRetry(t, "http", "--initial", "30s", "--jitter", "none", srv.URL)
	waitFor("retrying in 30s")
	cmd.Process.Signal(syscall.SIGINT)
	r := finish()
	if r.code != 130 || r.took > 5*time.Second {
		t.Errorf("exit %d after %v, stderr %q: want 130 at once", r.code, r.took, r.stderr)
	}
}

func TestScheduleUnlimited(t *testing.T) {
	r := runRetry(t, "", "schedule", "--attempts", "-1", "--jitter", "full", "--format", "json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 50 {
		t.Errorf("unlimited: %v, %d rows, want the first 50", err, len(rows))
	}
	r = runRetry(t, "", "schedule", "--attempts", "-1", "--jitter", "none", "--max-elapsed", "10s", "--format", "json")
	rows = nil
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 3 { // 1+2+4 = 7s; 8 more would pass 10s
		t.Errorf("--max-elapsed 10s: %v, %d rows, want 3: %s", err, len(rows), r.stdout)
	}
}

func TestCommandAttemptTimeout(t *testing.T) {
	r := runRetry(t, "", args(fast, []string{"--attempt-timeout", "100ms", "--attempts", "2", "--", "sleep", "30"})...)
	if r.code != 143 || strings.Count(r.stderr, "timed out after 100ms") != 2 || r.took > 5*time.Second {
		t.Errorf("exit %d after %v, stderr %q: want two attempts stopped by SIGTERM", r.code, r.took, r.stderr)
	}
}

// "giving up after N attempts in X": X counts every attempt, the first
// included, and the last failure is named.
func TestCommandGivingUpElapsed(t *testing.T) {
	r := runRetry(t, "", args(fast, []string{"--attempts", "2", "--", "sh", "-c", "sleep 0.3; exit 3"})...)
	m := regexp.MustCompile(`giving up after 2 attempts in (\S+) \(attempts used up\); last attempt: exit 3\n`).FindStringSubmatch(r.stderr)
	if r.code != 3 || m == nil {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if d, err := time.ParseDuration(m[1]); err != nil || d < 600*time.Millisecond {
		t.Errorf("elapsed %s: want at least the two attempts' 600ms", m[1])
	}
	r = runRetry(t, "", args(fast, []string{"--attempts", "1", "--attempt-timeout", "100ms", "--", "sleep", "30"})...)
	if r.code != 143 || !strings.Contains(r.stderr, "giving up after 1 attempt in ") ||
		!strings.Contains(r.stderr, "last attempt: timed out after 100ms, exit 143") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// counting is a loopback server that counts requests and answers 503.
type counting struct{ n atomic.Int32 }

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n.Add(1)
	http.Error(w, "busy", http.StatusServiceUnavailable)
}

// -o is checked before the first request: a file that cannot be written
// sends nothing; an existing file is left alone and a created one removed
// when no response arrives.
func TestHTTPOutputCheckedFirst(t *testing.T) {
	c := &counting{}
	srv := httptest.NewServer(c)
	defer srv.Close()
	dir := t.TempDir()
	for _, out := range []string{filepath.Join(dir, "missing", "out"), dir} {
		r := runRetry(t, "", args(fast, []string{"http", "-o", out, srv.URL})...)
		if r.code != 125 || c.n.Load() != 0 || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("-o %s: exit %d, %d requests sent, stderr %q; want 125 and none sent", out, r.code, c.n.Load(), r.stderr)
		}
	}
	url := srv.URL
	srv.Close()
	existing := filepath.Join(dir, "existing")
	os.WriteFile(existing, []byte("keep"), 0o644)
	created := filepath.Join(dir, "created")
	for _, out := range []string{existing, created} {
		if r := runRetry(t, "", args(fast, []string{"http", "--attempts", "1", "-o", out, url})...); r.code != 7 {
			t.Errorf("refused: exit %d, want 7", r.code)
		}
	}
	if b, err := os.ReadFile(existing); err != nil || string(b) != "keep" {
		t.Errorf("existing file now %q, %v: want it untouched when no response arrived", b, err)
	}
	if _, err := os.Stat(created); !os.IsNotExist(err) {
		t.Errorf("-o created a file although no response arrived: %v", err)
	}
}

// rawServer answers every connection on 127.0.0.1 with resp, verbatim,
// after reading the request head.
func rawServer(t *testing.T, resp string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			io.WriteString(c, resp)
			c.Close()
		}
	}()
	return "http://" + ln.Addr().String() + "/"
}

// Nothing a server sends reaches the terminal raw: status reason, headers
// (-v) and error messages are printed with control characters escaped.
func TestHTTPEscapesNetworkText(t *testing.T) {
	url := rawServer(t, "HTTP/1.1 404 Not\x1b]0;pwned\x07 Found\r\nX-Evil: a\u009b2Jb\u202ec\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno")
	r := runRetry(t, "", args(fast, []string{"http", "-v", url})...)
	if r.code != 22 || r.stdout != "no" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if strings.ContainsAny(r.stderr, "\x1b\x07\u202e\u009b") {
		t.Errorf("raw control characters on stderr: %q", r.stderr)
	}
	for _, s := range []string{`404 Not\x1b]0;pwned\x07 Found`, `< X-Evil: a\u009b2Jb\u202ec`} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %s: %q", s, r.stderr)
		}
	}
	// A header net/http refuses: the error message quotes it, escaped.
	bad := rawServer(t, "HTTP/1.1 200 OK\r\nX-Evil: a\x1b[2Jb\r\nContent-Length: 2\r\n\r\nno")
	r = runRetry(t, "", args(fast, []string{"http", "--attempts", "1", bad})...)
	if r.code != 7 || strings.Contains(r.stderr, "\x1b") || !strings.Contains(r.stderr, `a\x1b[2Jb`) {
		t.Errorf("malformed header: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runRetry(t, "", args(fast, []string{"http", "--log-format", "json", url})...)
	if strings.Contains(r.stderr, `\u001b`) || !strings.Contains(r.stderr, `\\x1b]0;pwned`) {
		t.Errorf("json: %q: want the control characters escaped in the message", r.stderr)
	}
}

// --attempt-timeout bounds the body of the printed response too: a body
// that stalls ends the run with exit 7, keeping what arrived.
func TestHTTPAttemptTimeoutBoundsBody(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	r := runRetry(t, "", args(fast, []string{"http", "--attempt-timeout", "500ms", srv.URL})...)
	if r.code != 7 || r.stdout != "partial" || !strings.Contains(r.stderr, "reading the body: --attempt-timeout 500ms passed (7 bytes written)") {
		t.Errorf("exit %d after %v, stdout %q, stderr %q", r.code, r.took, r.stdout, r.stderr)
	}
	if r.took > 5*time.Second {
		t.Errorf("took %v: the stalled body was not bounded", r.took)
	}
}

// -v says why a POST that got a retryable status was not retried.
func TestHTTPPostVerboseSaysWhy(t *testing.T) {
	f := &flaky{fail: 1, status: http.StatusServiceUnavailable}
	srv := httptest.NewServer(f)
	defer srv.Close()
	r := runRetry(t, "", args(fast, []string{"http", "-v", "-d", "x=1", srv.URL})...)
	if r.code != 22 || !strings.Contains(r.stderr, "not retried: POST without an idempotency key may have been processed") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// The cumulative maximum saturates instead of wrapping negative.
func TestScheduleHugeDurations(t *testing.T) {
	r := runRetry(t, "", "schedule", "--initial", "1000h", "--max-delay", "2000000h", "--multiplier", "10", "--attempts", "8", "--jitter", "none")
	if r.code != 0 || strings.Contains(r.stdout, "-") || !strings.Contains(r.stdout, ">2562047h47m16.854s") {
		t.Errorf("exit %d:\n%s", r.code, r.stdout)
	}
	r = runRetry(t, "", "schedule", "--initial", "1000h", "--max-delay", "2000000h", "--multiplier", "10", "--attempts", "8", "--jitter", "none", "--format", "json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 7 {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	for i, row := range rows {
		if c := row["cumulative_max_ms"].(float64); c <= 0 || i > 0 && c < rows[i-1]["cumulative_max_ms"].(float64) {
			t.Errorf("row %d: cumulative_max_ms %v", i+1, c)
		}
	}
}

// TestSimulateInterrupted: Ctrl-C or SIGTERM during a run ends it with 130
// or 143, and the output file retry created for it is removed (it was
// left empty).
func TestSimulateInterrupted(t *testing.T) {
	for _, c := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(c.sig.String(), func(t *testing.T) {
			csv := filepath.Join(t.TempDir(), "sig.csv")
			cmd, _, finish := startRetry(t, "simulate", "--clients", "3000000", "--trials", "50", "--csv", csv)
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if _, err := os.Stat(csv); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the CSV file was never created")
				}
			}
			cmd.Process.Signal(c.sig)
			r := finish()
			if r.code != c.code || !strings.Contains(r.stderr, "interrupted") {
				t.Errorf("exit %d, stderr %q; want %d and interrupted", r.code, r.stderr, c.code)
			}
			if _, err := os.Stat(csv); !os.IsNotExist(err) {
				t.Errorf("the CSV file retry created is still there (%v)", err)
			}
		})
	}
}
