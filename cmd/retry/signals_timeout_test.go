//go:build linux

package main_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// --attempt-timeout: "The attempt counts as failed and retryable." A command
// that handles the SIGTERM and exits 0 did not finish its work in time: it is
// retried, and retry does not report success when it gives up.
func TestAttemptTimeoutExitZeroStillFails(t *testing.T) {
	counter := filepath.Join(t.TempDir(), "n")
	script := `echo x >> "$1"; trap 'exit 0' TERM; sleep 5 & wait`
	r := runRetry(t, "", args(fast, []string{"--attempts", "2", "--attempt-timeout", "200ms", "--", "sh", "-c", script, "sh", counter})...)
	b, _ := os.ReadFile(counter)
	if n := strings.Count(string(b), "x"); r.code == 0 || n != 2 {
		t.Errorf("exit %d after %d attempts, stderr %q: want both attempts timed out, retried, and a non-zero exit", r.code, n, r.stderr)
	}
	if !strings.Contains(r.stderr, "timed out after 200ms") {
		t.Errorf("stderr %q: want the timeout reported", r.stderr)
	}
}

// retry never exits 0 after saying it gave up, nor reports success for a
// command it never ran: an attempt whose time (here the --max-elapsed
// budget, which bounds each attempt with --attempt-timeout) is already used
// up when it starts fails without starting the command, and retry exits 1.
func TestNoSuccessWithoutRunning(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ran")
	r := runRetry(t, "", "--max-elapsed", "1ns", "--attempt-timeout", "5s", "--", "sh", "-c", `echo ran > "$1"`, "sh", out)
	if r.code != 1 || !strings.Contains(r.stderr, "not started: no time left") {
		t.Errorf("exit %d with stderr %q: want 1 and the attempt reported not started", r.code, r.stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("the command ran although its attempt had no time left")
	}
}

// Each attempt runs in a process group of its own, so a SIGHUP that the
// shell sends to retry's job (the terminal closed) no longer reaches the
// command: retry passes it on, as it does SIGINT and SIGTERM, instead of
// dying and leaving the command running.
func TestSIGHUPForwarded(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd, _, finish := startRetry(t, "--initial", "10ms", "--", "sh", "-c", `echo $$ > "$1"; exec sleep 30 </dev/null >/dev/null 2>&1`, "sh", pidFile)
	pid := readPID(t, pidFile)
	time.Sleep(50 * time.Millisecond) // let sh exec sleep (its output elsewhere: a command outliving retry must not hold the test's pipes)
	cmd.Process.Signal(syscall.SIGHUP)
	r := finish()
	if st := procState(pid); st != "" && st != "Z" {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the command %d is still running (state %s) after retry got SIGHUP and exited %d: %q", pid, st, r.code, r.stderr)
	}
	if r.code != 128+int(syscall.SIGHUP) || strings.Contains(r.stderr, "retrying") {
		t.Errorf("exit %d, stderr %q: want 129 (the command killed by SIGHUP) and no retry", r.code, r.stderr)
	}
}

// SIGHUP during a wait ends it, as SIGINT and SIGTERM do, with 128+1.
func TestSIGHUPDuringWait(t *testing.T) {
	cmd, waitFor, finish := startRetry(t, "--initial", "30s", "--jitter", "none", "--", "sh", "-c", "exit 1")
	waitFor("retrying in 30s")
	cmd.Process.Signal(syscall.SIGHUP)
	r := finish()
	if r.code != 129 || !strings.Contains(r.stderr, "interrupted by SIGHUP while waiting") {
		t.Errorf("exit %d, stderr %q: want 129 and the interruption reported", r.code, r.stderr)
	}
}

// -v says a POST without an idempotency key is "sent once"; the transport
// counts any Idempotency-Key header as a key, an empty one too, and retries
// the POST: -v must not say it was sent once.
func TestEmptyIdempotencyKeyHeader(t *testing.T) {
	f := &flaky{fail: 1, status: http.StatusServiceUnavailable}
	srv := httptest.NewServer(f)
	defer srv.Close()
	r := runRetry(t, "", args(fast, []string{"http", "-v", "-H", "Idempotency-Key:", "-d", "x=1", srv.URL})...)
	bodies, _ := f.snapshot()
	if len(bodies) > 1 && strings.Contains(r.stderr, "sent once") {
		t.Errorf("the server saw %d requests, yet stderr says %q", len(bodies), r.stderr)
	}
}

// An empty command name is not a command that exists but cannot be executed
// (126): like env(1) and timeout(1), retry says 127, not found.
func TestEmptyCommandName(t *testing.T) {
	r := runRetry(t, "", args(fast, []string{"--", ""})...)
	if r.code != 127 || strings.Count(r.stderr, "\n") != 1 || strings.Contains(r.stderr, "retrying") {
		t.Errorf("exit %d, stderr %q: want 127, one line, no retries", r.code, r.stderr)
	}
}
