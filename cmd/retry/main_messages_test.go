package main_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// usageLine checks that a run was refused as bad input: exit 125, nothing
// on stdout, one line on stderr starting with "retry: " and holding each
// of want, and none of bad.
func usageLine(t *testing.T, a []string, r result, want []string, bad ...string) {
	t.Helper()
	ok := r.code == 125 && r.stdout == "" && strings.Count(r.stderr, "\n") == 1 && strings.HasPrefix(r.stderr, "retry: ")
	for _, w := range want {
		ok = ok && strings.Contains(r.stderr, w)
	}
	for _, b := range bad {
		ok = ok && !strings.Contains(r.stderr, b)
	}
	if !ok {
		t.Errorf("retry %q: exit %d, stdout %q, stderr %q; want 125 and one line with %q, without %q", a, r.code, r.stdout, r.stderr, want, bad)
	}
}

// -d @FILE, which curl reads as a file, is refused with one line pointing
// at --data-file even when the file exists: its name is never sent as the
// body (TestHTTPBadInputCaughtUpFront and TestBadInput hold the other
// refusals: -d @, an empty --idempotency-key, --version with arguments,
// --multiplier Inf).
func TestHTTPDataAtFileRefused(t *testing.T) {
	rc := &recorder{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	body := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(body, []byte(`{"n":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	a := args(fast, []string{"http", "-d", "@" + body, srv.URL})
	usageLine(t, a, runRetry(t, "", a...), []string{`-d "@` + body + `"`, "--data-file " + body})
	if m := rc.methods(); len(m) != 0 {
		t.Errorf("requests sent: %v", m)
	}
	// --data-file sends the file; a -d that merely holds an @ is sent as given.
	r := runRetry(t, "", args(fast, []string{"http", "--data-file", body, srv.URL})...)
	r2 := runRetry(t, "", args(fast, []string{"http", "-d", "a@b", srv.URL})...)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if r.code != 0 || r2.code != 0 || len(rc.bodyN) != 2 || rc.bodyN[0] != len(`{"n":1}`) || rc.bodyN[1] != 3 {
		t.Errorf("--data-file then -d a@b: exits %d, %d; bodies of %v bytes, want 7 and 3", r.code, r2.code, rc.bodyN)
	}
}

// Messages name what the user gave, in the user's words: a default the
// user did not pass is called the default; a flag value that does not
// parse names the flag and what it wants, not strconv; a command that
// cannot start is named as a shell would, without fork/exec; a signal
// by its name; one trial is not "1 trials".
func TestMessagesInTheUsersWords(t *testing.T) {
	for _, c := range []struct {
		args      []string
		want, bad []string
	}{
		{[]string{"--initial", "1000000h", "--", "true"}, []string{"the default --max-delay 32s is below --initial 1000000h"}, nil},
		{[]string{"--max-delay", "100ms", "--", "true"}, []string{"--max-delay 100ms is below the default --initial 1s"}, nil},
		{[]string{"--preset", "aws", "--initial", "1m", "--", "true"}, []string{"--preset aws's --max-delay 20s is below --initial 1m0s"}, nil},
		{[]string{"--attempts", "abc", "--", "true"}, []string{`--attempts "abc": want a whole number`}, []string{"strconv", "invalid syntax"}},
		{[]string{"--attempts", "99999999999999999999", "--", "true"}, []string{`--attempts "99999999999999999999": out of range`}, []string{"strconv"}},
		{[]string{"--multiplier", "x", "--", "true"}, []string{`--multiplier "x": want a number`}, []string{"strconv"}},
		{[]string{"simulate", "--seed", "-1"}, []string{`--seed "-1": want a whole number, 0 or more`}, []string{"strconv"}},
		{[]string{"http", "--initial", "5x", "http://127.0.0.1:1/"}, []string{`--initial "5x": want a duration`}, []string{"time:"}},
		{[]string{"simulate", "--clients", "10000", "--outage", "1000h", "--attempts", "1000000000", "--initial", "1ms", "--max-delay", "1ms"},
			[]string{"requests in 1 trial while"}, []string{"1 trials"}},
	} {
		usageLine(t, c.args, runRetry(t, "", c.args...), c.want, c.bad...)
	}
	for _, c := range []struct {
		cmd, want string
		code      int
	}{
		{"/nonexistent/cmd", "retry: /nonexistent/cmd: no such file or directory\n", 127},
		{"retry-no-such-command", "retry: retry-no-such-command: command not found\n", 127},
		{os.DevNull, "retry: " + os.DevNull + ": permission denied\n", 126},
	} {
		r := runRetry(t, "", args(fast, []string{"--", c.cmd})...)
		if r.code != c.code || r.stderr != c.want {
			t.Errorf("retry -- %s: exit %d, stderr %q; want %d and %q", c.cmd, r.code, r.stderr, c.code, c.want)
		}
	}
	for _, c := range []struct {
		sig  syscall.Signal
		name string
		code int
	}{{syscall.SIGINT, "SIGINT", 130}, {syscall.SIGTERM, "SIGTERM", 143}} {
		cmd, waitFor, finish := startRetry(t, "--initial", "30s", "--jitter", "none", "--", "sh", "-c", "exit 1")
		waitFor("retrying in 30s")
		cmd.Process.Signal(c.sig)
		if r := finish(); r.code != c.code || !strings.Contains(r.stderr, "retry: interrupted by "+c.name+" while waiting; not retrying\n") {
			t.Errorf("%s during the wait: exit %d, stderr %q", c.name, r.code, r.stderr)
		}
	}
}

// A simulation in which no client succeeds has no completion times: the
// table prints - for them, as for req/success, and the JSON null, not 0.
func TestSimulateNoSuccessNoTimes(t *testing.T) {
	a := []string{"simulate", "--clients", "100", "--outage", "1000h", "--attempts", "3", "--initial", "10ms", "--compare", "none,full"}
	r := runRetry(t, "", a...)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 3 {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		// strategy requests req/success succeeded gave-up p50 p99 max peak (x)
		if len(f) != 10 || f[2] != "-" || f[3] != "0" || f[5] != "-" || f[6] != "-" || f[7] != "-" {
			t.Errorf("row %q: want - for req/success, p50, p99 and max when none succeeded", l)
		}
	}
	r = runRetry(t, "", append(a, "--format", "json")...)
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("json: %v, %q", err, r.stdout)
	}
	for _, row := range rows {
		for _, k := range []string{"requests_per_success", "completion_p50_ms", "completion_p99_ms", "completion_max_ms"} {
			if v, ok := row[k]; !ok || v != nil {
				t.Errorf("json %s = %v (present %v), want null", k, v, ok)
			}
		}
	}
}

// jsonLines decodes every line of a --log-format json run's stderr.
func jsonLines(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q of %q is not JSON: %v", l, stderr, err)
		}
		out = append(out, m)
	}
	return out
}

// With --log-format json the last line of a run, in command and HTTP mode,
// carries its facts as fields (attempts, elapsed_ms, reason, exit_code or
// status), and a failure that ends the run is a JSON record too, not a
// free-text line.
func TestJSONLogFinalLine(t *testing.T) {
	f := &flaky{fail: 1000, status: http.StatusServiceUnavailable}
	srv := httptest.NewServer(f)
	defer srv.Close()
	ok := &flaky{fail: 1, status: http.StatusServiceUnavailable}
	okSrv := httptest.NewServer(ok)
	defer okSrv.Close()
	refused := httptest.NewServer(http.NotFoundHandler())
	refusedURL := refused.URL
	refused.Close()
	js := append([]string{"--log-format", "json"}, fast...)
	for _, c := range []struct {
		name string
		args []string
		code int
		msg  string
		want map[string]any // fields; "*" only present
	}{
		{"command gives up", []string{"--attempts", "2", "--", "sh", "-c", "exit 3"}, 3, "giving up",
			map[string]any{"level": "INFO", "attempts": 2.0, "elapsed_ms": "*", "reason": "attempts used up", "exit_code": 3.0, "last_attempt": "exit 3"}},
		{"non-retryable exit code", []string{"--on-exit", "4", "--", "sh", "-c", "exit 3"}, 3, "giving up",
			map[string]any{"attempts": 1.0, "elapsed_ms": "*", "reason": "error not retryable", "exit_code": 3.0}},
		{"command succeeds (-v)", []string{"-v", "--", "sh", "-c", `[ -e ok ] || { touch ok; exit 1; }`}, 0, "succeeded",
			map[string]any{"level": "DEBUG", "attempts": 2.0, "elapsed_ms": "*", "exit_code": 0.0}},
		{"command not found", []string{"--", "/nonexistent/cmd"}, 127, "cannot run the command",
			map[string]any{"level": "ERROR", "command": "/nonexistent/cmd", "error": "/nonexistent/cmd: no such file or directory", "exit_code": 127.0}},
		{"http success", []string{"http", okSrv.URL}, 0, "response",
			map[string]any{"level": "INFO", "method": "GET", "status": 200.0, "status_line": "HTTP/1.1 200 OK", "attempts": 2.0, "elapsed_ms": "*", "exit_code": 0.0}},
		{"http gives up on a status", []string{"http", "--attempts", "2", srv.URL}, 22, "response",
			map[string]any{"status": 503.0, "attempts": 2.0, "elapsed_ms": "*", "reason": "attempts used up", "exit_code": 22.0}},
		{"http no response", []string{"http", "--attempts", "2", refusedURL}, 7, "no response",
			map[string]any{"level": "ERROR", "url": refusedURL, "attempts": 2.0, "elapsed_ms": "*", "reason": "attempts used up",
				"error": "connection refused", "exit_code": 7.0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runRetry(t, "", args(js, c.args)...)
			lines := jsonLines(t, r.stderr)
			last := lines[len(lines)-1]
			if r.code != c.code || last["msg"] != c.msg {
				t.Fatalf("exit %d, last line %v; want exit %d and msg %q", r.code, last, c.code, c.msg)
			}
			for k, v := range c.want {
				got, present := last[k]
				if !present || v != "*" && got != v {
					t.Errorf("%s = %v (present %v), want %v; line %v", k, got, present, v, last)
				}
			}
		})
	}
}
