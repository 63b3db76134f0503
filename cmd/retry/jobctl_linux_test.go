//go:build linux

package main_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// procState is the state letter of /proc/PID/stat ("" when there is no
// such process; Z for a zombie, which has exited).
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// readPID waits (briefly) for the file the command writes its background
// job's pid to.
func readPID(t *testing.T, file string) int {
	t.Helper()
	for range 200 {
		if b, err := os.ReadFile(file); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("pid file %q", b)
			}
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the command did not write %s", file)
	return 0
}

// terminal runs retry as the session leader of a new pseudo-terminal, in
// its foreground process group, as an interactive shell would start it.
type terminal struct {
	t      *testing.T
	ptmx   *os.File
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	copied chan struct{}
}

// openPTY opens a pseudo-terminal pair, or skips the test where there is
// none (a container without /dev/pts), unless RETRYKIT_REQUIRE_PTY=1 (set
// by CI) makes the terminal tests required.
func openPTY(t *testing.T) (ptmx, tty *os.File) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		if os.Getenv("RETRYKIT_REQUIRE_PTY") == "1" {
			t.Fatalf("no pty: %v (RETRYKIT_REQUIRE_PTY=1 makes the terminal tests required)", err)
		}
		t.Skipf("no pty: %v", err)
	}
	return ptmx, tty
}

func startOnTerminal(t *testing.T, a ...string) *terminal {
	t.Helper()
	ptmx, tty := openPTY(t)
	term := &terminal{t: t, ptmx: ptmx, copied: make(chan struct{})}
	term.cmd = exec.Command(bin(t), a...)
	term.cmd.Stdin, term.cmd.Stdout, term.cmd.Stderr = tty, tty, tty
	term.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := term.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	go func() {
		defer close(term.copied)
		b := make([]byte, 4096)
		for {
			n, err := ptmx.Read(b) // ends with EIO when the last process holding the terminal exits
			term.mu.Lock()
			term.out.Write(b[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		term.cmd.Process.Kill()
		ptmx.Close()
	})
	return term
}

func (term *terminal) output() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

// waitFor waits up to 10 s for s on the terminal.
func (term *terminal) waitFor(s string) {
	term.t.Helper()
	for range 1000 {
		if strings.Contains(term.output(), s) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	term.cmd.Process.Kill()
	term.t.Fatalf("no %q on the terminal within 10s: %q", s, term.output())
}

// finish waits up to 10 s for retry to exit and returns its status.
func (term *terminal) finish() int {
	term.t.Helper()
	done := make(chan error, 1)
	go func() { done <- term.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		term.cmd.Process.Kill()
		<-done
		term.t.Fatalf("retry did not exit within 10s: %q", term.output())
	}
	select { // the rest of the output
	case <-term.copied:
	case <-time.After(5 * time.Second):
		term.t.Fatalf("the terminal stayed open after retry exited: %q", term.output())
	}
	var xe *exec.ExitError
	if errors.As(err, &xe) {
		return xe.ExitCode()
	}
	return 0
}

// A timed-out attempt's whole process group is stopped, its background
// jobs included, before retry goes on: nothing of it outlives retry. On a
// pipe (background group, signals forwarded) and on a terminal (the
// command's group in the terminal's foreground).
func TestAttemptTimeoutStopsProcessGroup(t *testing.T) {
	for _, onTerminal := range []bool{false, true} {
		for _, ignoresTERM := range []bool{false, true} {
			name := map[bool]string{false: "pipe", true: "terminal"}[onTerminal] +
				map[bool]string{false: "", true: "/grandchild-ignores-SIGTERM"}[ignoresTERM]
			t.Run(name, func(t *testing.T) {
				pidFile := filepath.Join(t.TempDir(), "pid")
				script := `sleep 30 & echo $! > "$1"; wait`
				if ignoresTERM {
					script = `trap "" TERM; sleep 30 & echo $! > "$1"; wait`
				}
				a := args(fast, []string{"--attempt-timeout", "300ms", "--attempts", "1", "--", "sh", "-c", script, "sh", pidFile})
				var code int
				var out string
				if onTerminal {
					term := startOnTerminal(t, a...)
					code = term.finish()
					out = term.output()
				} else {
					r := runRetry(t, "", a...)
					code, out = r.code, r.stderr
					// The grace of the test build (the link-time override took:
					// a release build's 2 s would end it past 1.9 s).
					if ignoresTERM && (r.took < 300*time.Millisecond+testKillGrace || r.took > 1900*time.Millisecond) {
						t.Errorf("SIGKILL came %v after the start; want the attempt timeout and then the grace period (%v)", r.took, testKillGrace)
					}
				}
				pid := readPID(t, pidFile)
				if st := procState(pid); st != "" && st != "Z" {
					syscall.Kill(pid, syscall.SIGKILL)
					t.Fatalf("the command's background job %d is still running (state %s) after retry exited %d: %q", pid, st, code, out)
				}
				want := 128 + int(syscall.SIGTERM)
				if ignoresTERM {
					want = 128 + int(syscall.SIGKILL) // the trap covers sh too: SIGKILL after the grace period
				}
				if code != want || !strings.Contains(out, "timed out after 300ms") {
					t.Errorf("exit %d, output %q: want %d and the timeout reported", code, out, want)
				}
			})
		}
	}
}

// On a terminal the command has the terminal during its attempt: it reads
// it (a background group would be stopped by SIGTTIN), and Ctrl-C reaches
// it and ends the retries with 130.
func TestTerminalForegroundAndCtrlC(t *testing.T) {
	t.Run("reads the terminal", func(t *testing.T) {
		term := startOnTerminal(t, "--initial", "10ms", "--", "sh", "-c", `echo ready; read x; echo "got $x"`)
		term.waitFor("ready")
		io.WriteString(term.ptmx, "hello\n")
		if code := term.finish(); code != 0 || !strings.Contains(term.output(), "got hello") {
			t.Errorf("exit %d, terminal %q", code, term.output())
		}
	})
	t.Run("Ctrl-C", func(t *testing.T) {
		term := startOnTerminal(t, "--initial", "10ms", "--", "sh", "-c", `echo ready; sleep 30`)
		term.waitFor("ready")
		time.Sleep(50 * time.Millisecond) // let sh start sleep
		io.WriteString(term.ptmx, "\x03")
		code := term.finish()
		out := term.output()
		if code != 130 || strings.Contains(out, "retrying in") || !strings.Contains(out, "attempt 1 was interrupted by SIGINT; not retrying") {
			t.Errorf("exit %d, terminal %q: want 130, no retry", code, out)
		}
	})
	t.Run("Ctrl-C handled by the command, exit 130", func(t *testing.T) {
		term := startOnTerminal(t, "--initial", "10ms", "--", "sh", "-c", `trap "exit 130" INT; echo ready; read x`)
		term.waitFor("ready")
		time.Sleep(50 * time.Millisecond) // let sh block in read
		io.WriteString(term.ptmx, "\x03")
		code := term.finish()
		out := term.output()
		if code != 130 || strings.Contains(out, "retrying in") || !strings.Contains(out, "attempt 1 was interrupted by SIGINT; not retrying") {
			t.Errorf("exit %d, terminal %q: want 130, no retry", code, out)
		}
	})
	// Ctrl-Z stops the command's group; retry passes the stop on (its own
	// stop is discarded here, where the test makes its group orphaned, as
	// POSIX says) and continues the command: it is never left stopped with
	// retry waiting for it.
	t.Run("Ctrl-Z", func(t *testing.T) {
		term := startOnTerminal(t, "--", "sh", "-c", `echo ready; read x; echo "got $x"`)
		term.waitFor("ready")
		time.Sleep(50 * time.Millisecond) // let sh block in read
		io.WriteString(term.ptmx, "\x1a")
		time.Sleep(100 * time.Millisecond) // let the stop land
		io.WriteString(term.ptmx, "hi\n")
		if code := term.finish(); code != 0 || !strings.Contains(term.output(), "got hi") {
			t.Errorf("exit %d, terminal %q", code, term.output())
		}
	})
	t.Run("Ctrl-C during a wait", func(t *testing.T) {
		term := startOnTerminal(t, "--initial", "30s", "--jitter", "none", "--", "sh", "-c", "exit 1")
		term.waitFor("retrying in")
		io.WriteString(term.ptmx, "\x03")
		if code := term.finish(); code != 130 {
			t.Errorf("exit %d, terminal %q: want 130 (retry has the terminal back between attempts)", code, term.output())
		}
	})
}
