//go:build unix

package pgtest

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStartStop(t *testing.T) {
	s := Start(t, "deadlock_timeout=100ms")
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if !strings.Contains(s.Log(), "ready to accept connections") {
		t.Fatalf("log has no ready line:\n%s", s.Log())
	}
	pid := s.proc.Load().Pid()
	s.Stop()
	if _, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		t.Fatal("dial after Stop: want an error")
	}
	// No process of the server's group is left.
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("kill(-%d, 0) after Stop = %v; want ESRCH", pid, err)
	}
	s.Stop() // a second Stop does nothing
}
