package main_test

// The tests that run retry on a pseudo-terminal (openPTY, Linux only).

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestCountdownOnTerminal(t *testing.T) {
	ptmx, tty := openPTY(t)
	defer ptmx.Close()
	cmd := exec.Command(bin(t), "--initial", "450ms", "--jitter", "none", "--attempts", "2", "--", "sh", "-c", "exit 5")
	cmd.Stderr = tty
	s, err := onTerminal(t, cmd, ptmx, tty)
	var xe *exec.ExitError
	if !errors.As(err, &xe) || xe.ExitCode() != 5 {
		t.Fatalf("exit %v, want 5", err)
	}
	frames := strings.Count(s, "\r\x1b[Kretry: attempt 1/2 failed (exit 5); retrying in ")
	if frames < 3 || !strings.Contains(s, "retrying in 450ms") || !strings.Contains(s, "; waited ") {
		t.Errorf("%d countdown frames in %q: want the line rewritten in place, ending with the time waited", frames, s)
	}
}

// A body printed to a terminal shows control characters escaped (newline
// and tab kept); to a pipe or file it is passed unchanged.
func TestHTTPBodyOnTerminal(t *testing.T) {
	body := "a\x1b[31mb\tc\r\nd\u009be\xffok\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
	defer srv.Close()
	if r := runRetry(t, "", "http", srv.URL); r.code != 0 || r.stdout != body {
		t.Errorf("pipe: exit %d, stdout %q, want the exact body", r.code, r.stdout)
	}
	ptmx, tty := openPTY(t)
	defer ptmx.Close()
	cmd := exec.Command(bin(t), "http", srv.URL)
	cmd.Stdout = tty
	s, err := onTerminal(t, cmd, ptmx, tty)
	want := `a\x1b[31mb` + "\tc\r\r\n" + `d\u009be\xffok` // the terminal turns \n into \r\n
	if err != nil || !strings.Contains(s, want) || strings.ContainsAny(s, "\x1b\u009b") {
		t.Errorf("terminal: %v, %q; want %q", err, s, want)
	}
}

// onTerminal starts cmd, whose output the caller has pointed at tty (from
// openPTY), and returns what reached the terminal, read from ptmx, and
// cmd's exit. It fails t if cmd has not exited within 10s.
func onTerminal(t *testing.T, cmd *exec.Cmd, ptmx, tty *os.File) (string, error) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&out, ptmx); close(copied) }() // ends with EIO when the child exits
	var err error
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("no exit within 10s")
	}
	<-copied
	return out.String(), err
}
