// Package pgtest starts real PostgreSQL servers (Debian's postgresql
// package: initdb and postgres) on free loopback ports for the tests of
// retrysql. Each server is a cluster of its own in a new temporary
// directory, stopped and removed when the test ends, failed or not, and
// killed with the test binary if that dies first (Linux): the process
// machinery is internal/testproc's.
//
// initdb and postgres refuse to run as root. When the test runs as root
// (as CI does), both run as the user nobody, who is given the cluster's
// directory.
//
// Without the binaries the test is skipped with a message saying how to
// install them, unless RETRYKIT_REQUIRE_POSTGRES=1 (set by CI), which makes
// it fail instead. Standard library only.
package pgtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/retrykit/retry/internal/testproc"
)

// Server is one postgres process listening on 127.0.0.1, with the
// superuser postgres and trust authentication. It is safe for concurrent
// use.
type Server struct {
	dir  string // the temporary directory: data/ and postgres.log
	port int

	proc atomic.Pointer[testproc.Proc] // nil once stopped
}

// Binaries returns the directory that holds initdb and postgres: the one
// of initdb on PATH, else the newest /usr/lib/postgresql/<version>/bin.
// Without them it skips tb (or, with RETRYKIT_REQUIRE_POSTGRES=1, fails it).
func Binaries(tb testing.TB) string {
	tb.Helper()
	if dir, ok := binDir(); ok {
		return dir
	}
	testproc.Missing(tb, "RETRYKIT_REQUIRE_POSTGRES",
		"postgres not installed: install it (Debian: apt-get install postgresql) to run this test")
	return ""
}

func binDir() (string, bool) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && has(filepath.Dir(real)) {
			return filepath.Dir(real), true
		}
		if has(filepath.Dir(p)) {
			return filepath.Dir(p), true
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if has(d) {
			return d, true
		}
	}
	return "", false
}

// version is the major version in /usr/lib/postgresql/<version>/bin.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Start creates a cluster in a new temporary directory, starts postgres on
// a free loopback port and stops it (and removes the directory) when tb
// ends. Each setting ("deadlock_timeout=100ms") is passed as a -c option,
// after the defaults: fsync, synchronous_commit and full_page_writes off
// (a test keeps nothing), max_connections 100.
func Start(tb testing.TB, settings ...string) *Server {
	tb.Helper()
	bin := Binaries(tb)
	s, err := launch(bin, settings)
	if s != nil {
		tb.Cleanup(s.remove)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// Launch is Start for a program, not a test: it creates the cluster and
// starts postgres, and the caller must call Close. Without the binaries it
// returns an error saying how to install them.
func Launch(settings ...string) (*Server, error) {
	bin, ok := binDir()
	if !ok {
		return nil, errors.New("pgtest: postgres not installed (Debian: apt-get install postgresql)")
	}
	s, err := launch(bin, settings)
	if err != nil && s != nil {
		s.remove()
		return nil, err
	}
	return s, err
}

// Close stops a server from Launch and removes its directory.
func (s *Server) Close() { s.remove() }

// launch creates a cluster and starts postgres on it. When it returns a
// Server, even with an error, its remove must be called.
func launch(bin string, settings []string) (*Server, error) {
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(tempRoot(cred), "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	if cred != nil {
		if err := os.Chown(dir, int(cred.uid), int(cred.gid)); err != nil {
			return s, err
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"),
		"-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync", "--no-instructions")
	initdb.Dir = dir
	testproc.Prepare(initdb)
	if err := runAs(initdb, cred); err != nil {
		return s, err
	}
	if out, err := initdb.CombinedOutput(); err != nil {
		return s, fmt.Errorf("pgtest: initdb: %v\n%s", err, out)
	}
	for try := 1; ; try++ {
		// The port is free when asked for, but another process may take
		// it before postgres binds it: then postgres exits saying so.
		if s.port, err = testproc.FreePort(); err != nil {
			return s, err
		}
		err := s.start(bin, cred, settings)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errPortTaken) || try == 5 {
			return s, err
		}
	}
}

// tempRoot is where the cluster's directory is made: the system's
// temporary directory, or /tmp when postgres runs as another user (cred)
// who could not reach into it.
func tempRoot(cred *owner) string {
	root := os.TempDir()
	if cred == nil {
		return root
	}
	if fi, err := os.Stat(root); err == nil && fi.Mode().Perm()&0o001 != 0 {
		return root
	}
	return "/tmp"
}

// remove stops the server and removes its directory.
func (s *Server) remove() {
	s.Stop()
	os.RemoveAll(s.dir)
}

var shared struct {
	sync.Mutex
	settings []string
	main     bool
	s        *Server
	err      error
}

// Main runs the tests of a package whose tests share one server (see
// [Shared]), started with settings at the first call of Shared, and
// stops it once they have run, failed or not. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, "deadlock_timeout=100ms")) }
func Main(m *testing.M, settings ...string) int {
	shared.Lock()
	shared.settings, shared.main = settings, true
	shared.Unlock()
	defer func() {
		shared.Lock()
		defer shared.Unlock()
		if shared.s != nil {
			shared.s.remove()
		}
	}()
	return m.Run()
}

// Shared returns the one server of the test binary, starting it at the
// first call with the settings given to [Main] (which must run the
// tests). Tests that share it should each create a database of their own.
// Without the binaries it skips tb (or fails it, as Binaries does).
func Shared(tb testing.TB) *Server {
	tb.Helper()
	bin := Binaries(tb)
	shared.Lock()
	defer shared.Unlock()
	if !shared.main {
		tb.Fatal("pgtest: Shared needs pgtest.Main to run the tests (from TestMain)")
	}
	if shared.s == nil && shared.err == nil {
		shared.s, shared.err = launch(bin, shared.settings)
	}
	if shared.err != nil {
		tb.Fatal(shared.err)
	}
	return shared.s
}

var errPortTaken = errors.New("pgtest: another process took the port")

// owner is a user other than this process's that initdb and postgres run
// as.
type owner struct{ uid, gid uint32 }

// credential returns the user to run initdb and postgres as: nil unless
// this process is root, then the user nobody.
func credential() (*owner, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, and postgres refuses to: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgtest: user nobody has uid %q, gid %q", u.Uid, u.Gid)
	}
	return &owner{uid: uint32(uid), gid: uint32(gid)}, nil
}

func (s *Server) start(bin string, cred *owner, settings []string) error {
	logPath := filepath.Join(s.dir, "postgres.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"-D", filepath.Join(s.dir, "data"), "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + s.dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=100"}
	for _, kv := range settings {
		args = append(args, "-c", kv)
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := runAs(cmd, cred); err != nil {
		return err
	}
	p, err := testproc.Start(cmd)
	if err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	s.proc.Store(p)
	err = p.Await(30*time.Second, 10*time.Millisecond, func() (bool, error) { return s.ready(p.Pid()), nil })
	switch {
	case errors.Is(err, testproc.ErrExited):
		s.proc.Store(nil)
		log, _ := os.ReadFile(logPath)
		if strings.Contains(string(log), "already in use") {
			return fmt.Errorf("%w: %d", errPortTaken, s.port)
		}
		return fmt.Errorf("pgtest: postgres exited at start:\n%s", log)
	case err != nil:
		s.Stop()
		log, _ := os.ReadFile(logPath)
		return fmt.Errorf("pgtest: postgres on port %d not ready within 30s:\n%s", s.port, log)
	}
	return nil
}

// ready reports whether the postmaster pid has written "ready" into its
// postmaster.pid (line 8) and accepts TCP connections on the port.
func (s *Server) ready(pid int) bool {
	b, err := os.ReadFile(filepath.Join(s.dir, "data", "postmaster.pid"))
	if err != nil {
		return false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 8 || strings.TrimSpace(lines[0]) != strconv.Itoa(pid) || strings.TrimSpace(lines[7]) != "ready" {
		return false
	}
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// runAs makes cmd run as cred when not nil.
func runAs(cmd *exec.Cmd, cred *owner) error {
	if cred == nil {
		return nil
	}
	return testproc.RunAs(cmd, cred.uid, cred.gid)
}

// Addr returns "127.0.0.1:port".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL returns a connection URL for database db as the superuser postgres,
// without TLS: "postgres://postgres@127.0.0.1:port/db?sslmode=disable".
func (s *Server) URL(db string) string {
	return "postgres://postgres@" + s.Addr() + "/" + db + "?sslmode=disable"
}

// Log returns what the server has logged so far (its stderr).
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
	return string(b)
}

// Stop shuts the server down at once (SIGQUIT, postgres's immediate
// shutdown, which also frees its shared memory), kills its process group
// if it has not exited within 5 s, and waits for it. Stopping a stopped
// server does nothing.
func (s *Server) Stop() {
	if p := s.proc.Swap(nil); p != nil {
		// The group too, past the grace: a backend the postmaster
		// could not reap.
		p.Stop(syscall.SIGQUIT, 5*time.Second)
	}
}
