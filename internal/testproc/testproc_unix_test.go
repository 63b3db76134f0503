//go:build unix

package testproc

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// startWatched starts the helper in role with a pipe whose write end it
// and its child inherit as file 3: reading the other end sees EOF once
// both have died. It returns the Proc, the child's pid and the read end.
func startWatched(t *testing.T, role string, start func(*exec.Cmd) (*Proc, error)) (*Proc, int, *os.File) {
	t.Helper()
	alive, aliveW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { alive.Close(); out.Close() })
	cmd := helperCmd(role)
	cmd.ExtraFiles = []*os.File{aliveW}
	cmd.Stdout = outW
	p, err := start(cmd)
	aliveW.Close()
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(os.Kill, 0) })
	child := readPid(t, out)
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
	return p, child, alive
}

// gone waits up to 10 s for EOF on alive: every process holding its write
// end has died.
func gone(t *testing.T, alive *os.File) bool {
	t.Helper()
	alive.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.ReadAll(alive)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal(err)
	}
	return err == nil
}

// Stop signals, waits out the grace of a process that ignores the signal,
// then kills its whole group: the child it started dies with it.
func TestStopKillsGroup(t *testing.T) {
	p, child, alive := startWatched(t, "ignore", Start)
	if pgid, err := syscall.Getpgid(child); err != nil || pgid != p.Pid() {
		t.Fatalf("child's group %d, %v; want the helper's own group %d", pgid, err, p.Pid())
	}
	start := time.Now()
	p.Stop(syscall.SIGTERM, 200*time.Millisecond)
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("Stop returned after %v, before the 200ms grace of a process ignoring SIGTERM", d)
	}
	if !gone(t, alive) {
		t.Fatal("the helper or its child still runs 10s after Stop")
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
}
