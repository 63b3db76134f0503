// Package testproc starts the real servers of the tests (postgres,
// redis-server) as processes of their own: on a free loopback port, in a
// process group of its own that Stop reaches whole, killed with the test
// binary if that dies first (Linux), waited for until it is ready, and
// stopped and reaped. It also skips or fails a test whose binary is
// missing. internal/pgtest and internal/redistest are built on it.
// Standard library only.
package testproc

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// Missing ends tb because a binary it needs is not installed: it skips tb
// with msg, or, when the environment variable env is "1" (as CI sets it),
// fails it with msg followed by " (env=1 makes it required)".
func Missing(tb testing.TB, env, msg string) {
	tb.Helper()
	if os.Getenv(env) == "1" {
		tb.Fatal(msg + " (" + env + "=1 makes it required)")
	}
	tb.Skip(msg)
}

// FreePort asks the kernel for a free port on 127.0.0.1. The port is free
// when asked for, but another process may take it before the server binds
// it: a caller that sees its server fail for that reason tries another.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Prepare puts cmd in a process group of its own, so that [Proc.Stop]
// reaches the children it forks too (Unix; elsewhere Stop reaches only the
// process), and makes it die with the test process ([KillWithParent]).
// [Start] calls it; call it yourself before Run or Output for a command
// not started by Start. It keeps what cmd.SysProcAttr already holds.
func Prepare(cmd *exec.Cmd) {
	setGroup(cmd)
	KillWithParent(cmd)
}

// ErrExited is returned by [Proc.Await] when the process exits before it
// is ready.
var ErrExited = errors.New("testproc: the process exited before it was ready")

// ErrNotReady is returned by [Proc.Await] when the process is still not
// ready at the deadline.
var ErrNotReady = errors.New("testproc: the process was not ready in time")

// Proc is one running process started by [Start]. Its methods are safe
// for concurrent use. Get one from Start; the zero Proc is not usable.
type Proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited and been reaped
	stop sync.Once
}

// Start prepares cmd ([Prepare]) and starts it, and reaps it in the
// background when it exits (see [Proc.Done]). The caller must call
// [Proc.Stop] (from t.Cleanup, say) unless the process exits by itself.
func Start(cmd *exec.Cmd) (*Proc, error) {
	Prepare(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	return p, nil
}

// Pid returns the process id, which is also the id of its process group
// on Unix.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done returns a channel closed once the process has exited and been
// reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Await calls ready every poll interval until it reports true (Await
// returns nil), returns an error (Await returns that error), the process
// exits ([ErrExited]) or timeout has passed ([ErrNotReady]); ready is
// called first, before the process's exit and the deadline are looked at.
// Await leaves the process running on error: the caller stops it.
func (p *Proc) Await(timeout, poll time.Duration, ready func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := ready()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-p.done:
			return ErrExited
		default:
		}
		if time.Now().After(deadline) {
			return ErrNotReady
		}
		time.Sleep(poll)
	}
}

// Stop sends sig to the process, gives it grace to exit, then kills its
// whole process group (SIGKILL: children it could not reap, or the process
// itself past grace) and waits until it has been reaped. With os.Kill and
// no grace, it kills at once. Only the first call does anything; later
// ones return at once, the process being reaped.
func (p *Proc) Stop(sig os.Signal, grace time.Duration) {
	p.stop.Do(func() {
		_ = p.cmd.Process.Signal(sig)
		if grace > 0 {
			select {
			case <-p.done:
			case <-time.After(grace):
			}
		}
		killGroup(p.cmd)
		<-p.done
	})
}
