//go:build linux

package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nohup(1) starts retry with SIGHUP ignored. Notifying SIGHUP unconditionally
// replaces that disposition with a handler (os/signal: "If the program was
// started with SIGHUP or SIGINT ignored, and Notify is called for either
// signal, a signal handler will be installed for that signal and it will no
// longer be ignored"), and the command, exec'd by a process that handles
// SIGHUP, starts with SIGHUP at its default (die) instead of ignored. So
// `nohup retry -- cmd` was killed, command and all, by the very SIGHUP that
// nohup is there to ignore. A SIGHUP ignored at startup must stay ignored.
func TestIgnoredSignalsStayIgnored(t *testing.T) {
	// The same for SIGINT, which a shell without job control ignores in
	// its background jobs (retry ... &).
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			pidFile, done := filepath.Join(dir, "pid"), filepath.Join(dir, "done")
			// sh's trap "" is what nohup does: the signal ignored, kept across exec.
			name := map[syscall.Signal]string{syscall.SIGHUP: "HUP", syscall.SIGINT: "INT"}[sig]
			cmd := exec.Command("sh", "-c", `trap "" `+name+`; exec "$0" "$@"`, bin(t), "--initial", "10ms", "--",
				"sh", "-c", `echo $$ > "$1"; sleep 0.5; echo ok > "$2"`, "sh", pidFile, done)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			readPID(t, pidFile)
			time.Sleep(50 * time.Millisecond)
			cmd.Process.Signal(sig) // the terminal closed, or a Ctrl-C meant for the foreground job
			err := cmd.Wait()
			code := 0
			if xe, ok := err.(*exec.ExitError); ok {
				code = xe.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if _, serr := os.Stat(done); code != 0 || serr != nil {
				t.Errorf("started with %v ignored, the signal ended retry with exit %d (stderr %q), command finished: %v; want it ignored, exit 0",
					sig, code, stderr.String(), serr == nil)
			}
		})
	}
}
