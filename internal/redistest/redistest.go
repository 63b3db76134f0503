// Package redistest starts real redis-server processes on free loopback
// ports for tests of the Redis and Valkey integrations (Valkey speaks the
// same protocol). Each server is the test's own process, stopped when the
// test ends and killed with the test binary if that dies first (Linux):
// the process machinery is internal/testproc's.
//
// Without a redis-server binary the test is skipped with a message saying
// how to install it, unless RETRYKIT_REQUIRE_REDIS=1 (set by CI), which
// makes it fail instead.
package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry/internal/testproc"
)

// Server is one redis-server process listening on 127.0.0.1. It is safe
// for concurrent use.
type Server struct {
	tb   testing.TB
	bin  string
	dir  string
	port int

	proc atomic.Pointer[testproc.Proc] // nil while stopped
}

// Binary returns the path of redis-server, skipping (or, with
// RETRYKIT_REQUIRE_REDIS=1, failing) tb when there is none.
func Binary(tb testing.TB) string {
	tb.Helper()
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	testproc.Missing(tb, "RETRYKIT_REQUIRE_REDIS",
		"redis-server not installed: install it (Debian: apt-get install redis-server) to run this test")
	return ""
}

// Start starts a new redis-server on a free loopback port, with no
// persistence, and stops it when tb ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{tb: tb, bin: Binary(tb), dir: tb.TempDir()}
	for try := 1; ; try++ {
		// The port is free when asked for, but another test's server may
		// take it before ours binds it: then ours exits, and the PING
		// would reach the other one. start checks the answering pid.
		port, err := testproc.FreePort()
		if err != nil {
			tb.Fatal(err)
		}
		s.port = port
		err = s.start()
		if err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || try == 5 {
			tb.Fatal(err)
		}
	}
	tb.Cleanup(s.Stop)
	return s
}

// errPortTaken: another process answered on the port of a server being
// started.
var errPortTaken = errors.New("redistest: another process took the port")

// Addr returns "127.0.0.1:port".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Port returns the server's port.
func (s *Server) Port() int { return s.port }

func (s *Server) start() error {
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--daemonize", "no", "--protected-mode", "yes",
		"--logfile", filepath.Join(s.dir, "redis.log"))
	p, err := testproc.Start(cmd)
	if err != nil {
		return fmt.Errorf("redistest: start redis-server: %w", err)
	}
	err = p.Await(10*time.Second, 5*time.Millisecond, func() (bool, error) {
		pid, err := serverPID(s.Addr())
		if err != nil {
			return false, nil
		}
		if pid != p.Pid() {
			return false, fmt.Errorf("%w: %s answers with pid %d, not %d", errPortTaken, s.Addr(), pid, p.Pid())
		}
		return true, nil
	})
	switch {
	case errors.Is(err, testproc.ErrExited):
		log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
		if strings.Contains(string(log), "Address already in use") {
			// Whatever holds the port (a listener, a busy server)
			// did not answer INFO as ours would.
			return fmt.Errorf("%w: %s (%s)", errPortTaken, s.Addr(), bytes.TrimSpace(log))
		}
		return fmt.Errorf("redistest: redis-server exited at start: %s", log)
	case errors.Is(err, testproc.ErrNotReady):
		p.Stop(os.Kill, 0)
		return fmt.Errorf("redistest: redis-server on %s did not answer PING within 10s", s.Addr())
	case err != nil:
		p.Stop(os.Kill, 0)
		return err
	}
	s.proc.Store(p)
	return nil
}

// Stop kills the server (SIGKILL: it keeps nothing) and waits for it to
// exit. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	if p := s.proc.Swap(nil); p != nil {
		p.Stop(os.Kill, 0)
	}
}

// Restart starts a stopped server again on the same port, empty (all keys
// lost, as after a crash). It fails tb if the port cannot be had again.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.tb.Fatal(err)
	}
}

// Do sends one command over a new connection and returns the reply as
// text (a simple string, error, integer or bulk string; arrays are joined
// with newlines). A reply that is a Redis error is returned as a Go error.
func (s *Server) Do(args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr(), 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(c))
}

// maxBulk is the longest bulk string and the largest array readReply
// accepts: Redis's own limit (proto-max-bulk-len, 512 MiB).
const maxBulk = 512 << 20

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("redistest: empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("%s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", err
		}
		if n < 0 {
			return "", nil
		}
		if n > maxBulk {
			return "", fmt.Errorf("redistest: bulk length %d over %d", n, maxBulk)
		}
		// Grow with the bytes that arrive, not with the declared length.
		var buf bytes.Buffer
		if _, err := io.CopyN(&buf, r, int64(n)+2); err != nil {
			return "", err
		}
		return string(buf.Bytes()[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", err
		}
		if n > maxBulk {
			return "", fmt.Errorf("redistest: array length %d over %d", n, maxBulk)
		}
		parts := make([]string, 0, min(max(n, 0), 64))
		for range n {
			p, err := readReply(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("redistest: unexpected reply %q", line)
}

// CommandCalls returns how many times the server executed cmd (lower
// case, as INFO commandstats names it), from INFO commandstats.
func (s *Server) CommandCalls(cmd string) (int, error) {
	info, err := s.Do("INFO", "commandstats")
	if err != nil {
		return 0, err
	}
	prefix := "cmdstat_" + strings.ToLower(cmd) + ":calls="
	for _, l := range strings.Split(info, "\n") {
		l = strings.TrimSpace(l)
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			v, _, _ := strings.Cut(rest, ",")
			return strconv.Atoi(v)
		}
	}
	return 0, nil
}

// CallsDuring returns how many times the server executed cmd (lower case)
// while f ran, from CommandCalls before and after.
func (s *Server) CallsDuring(tb testing.TB, cmd string, f func()) int {
	tb.Helper()
	before, err := s.CommandCalls(cmd)
	if err != nil {
		tb.Fatal(err)
	}
	f()
	after, err := s.CommandCalls(cmd)
	if err != nil {
		tb.Fatal(err)
	}
	return after - before
}

// serverPID asks the server on addr for its process id (INFO server).
func serverPID(addr string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("INFO server\r\n")); err != nil {
		return 0, err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if !strings.HasPrefix(head, "$") || err != nil || n < 0 || n > 1<<20 {
		return 0, fmt.Errorf("redistest: INFO answered %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("redistest: INFO server has no process_id")
}

// SlowIncr is a Lua script that increments KEYS[1], then keeps the server
// busy for 200 ms before it answers (other clients get BUSY meanwhile):
// a command the server applied while its reply is still to come.
const SlowIncr = `redis.call('INCR', KEYS[1])
local t0 = redis.call('TIME')
local s = t0[1]*1000000 + t0[2]
while true do local t = redis.call('TIME'); if t[1]*1000000 + t[2] - s > 200000 then break end end
return 1`
