package testproc

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// helperEnv names the role the test binary plays when a test re-executes
// it (see helper); the tests run as usual when it is unset.
const helperEnv = "RETRYKIT_TESTPROC_HELPER"

func TestMain(m *testing.M) {
	if role := os.Getenv(helperEnv); role != "" {
		os.Exit(helper(role))
	}
	os.Exit(m.Run())
}

// helper is the test binary re-executed as a short-lived server. Roles:
//
//   - listen: accept on 127.0.0.1:$RETRYKIT_TESTPROC_PORT; SIGTERM ends it.
//   - exit: exit at once with status 3.
//   - sleep: sleep (file 3, if given, stays open until it dies).
//   - ignore: ignore SIGTERM, start a sleep child in its own process group,
//     print the child's pid, sleep.
//   - parent: start a sleep child with Start (a group of its own, killed
//     with its parent), print the child's pid, sleep.
//
// Every role sleeps at most a minute, so that nothing a failed test leaves
// lives long.
func helper(role string) int {
	switch role {
	case "listen":
		l, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("RETRYKIT_TESTPROC_PORT"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// The kernel completes connections into the backlog: no Accept
		// is needed for a dial to succeed.
		defer l.Close()
	case "exit":
		return 3
	case "sleep":
	case "ignore", "parent":
		if role == "ignore" {
			signal.Ignore(syscall.SIGTERM)
		}
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), helperEnv+"=sleep")
		if f := os.NewFile(3, "alive"); f != nil {
			child.ExtraFiles = []*os.File{f}
		}
		var err error
		if role == "ignore" {
			err = child.Start()
		} else {
			runtime.LockOSThread() // Pdeathsig follows the thread that forked
			_, err = Start(child)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(child.Process.Pid)
	default:
		fmt.Fprintln(os.Stderr, "unknown helper role", role)
		return 1
	}
	time.Sleep(time.Minute)
	return 0
}

// helperCmd is the test binary re-executed in role (see helper), with env
// added.
func helperCmd(role string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), helperEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	return cmd
}

func dial(addr string) (bool, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false, nil
	}
	c.Close()
	return true, nil
}

func TestStartAwaitStop(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p, err := Start(helperCmd("listen", "RETRYKIT_TESTPROC_PORT="+strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(os.Kill, 0) })
	if err := p.Await(10*time.Second, 5*time.Millisecond, func() (bool, error) { return dial(addr) }); err != nil {
		t.Fatalf("Await: %v", err)
	}
	select {
	case <-p.Done():
		t.Fatal("Done closed while the process runs")
	default:
	}
	start := time.Now()
	p.Stop(syscall.SIGTERM, 5*time.Second)
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("Stop of a process that exits on SIGTERM took %v; want it to return once the process has gone, not after the grace", d)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	if ok, _ := dial(addr); ok {
		t.Fatal("dial after Stop succeeded")
	}
	p.Stop(syscall.SIGTERM, 5*time.Second) // a second Stop returns at once
}

func TestAwaitExited(t *testing.T) {
	p, err := Start(helperCmd("exit"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(os.Kill, 0) })
	err = p.Await(10*time.Second, 5*time.Millisecond, func() (bool, error) { return false, nil })
	if !errors.Is(err, ErrExited) {
		t.Fatalf("Await on a process that exits: %v; want ErrExited", err)
	}
	<-p.Done()
	if code := p.cmd.ProcessState.ExitCode(); code != 3 {
		t.Fatalf("exit code %d; want 3", code)
	}
}

// Await returns ready's error as it is, and ErrNotReady past the
// deadline, leaving the process running either way.
func TestAwaitErrors(t *testing.T) {
	p, err := Start(helperCmd("sleep"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(os.Kill, 0) })
	errMine := errors.New("not the one")
	if err := p.Await(10*time.Second, time.Millisecond, func() (bool, error) { return false, errMine }); err != errMine {
		t.Fatalf("Await with a failing ready: %v; want ready's error", err)
	}
	if err := p.Await(100*time.Millisecond, 5*time.Millisecond, func() (bool, error) { return false, nil }); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Await never ready: %v; want ErrNotReady", err)
	}
	select {
	case <-p.Done():
		t.Fatal("Await stopped the process")
	default:
	}
	p.Stop(os.Kill, 0)
	select {
	case <-p.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
}

// Await's clock: ready first, then the exit, then the deadline, one poll
// apart.
func TestAwaitTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &Proc{done: make(chan struct{})}
		start, calls := time.Now(), 0
		err := p.Await(time.Second, 10*time.Millisecond, func() (bool, error) { calls++; return calls == 3, nil })
		if err != nil || calls != 3 || time.Since(start) != 20*time.Millisecond {
			t.Fatalf("ready on the 3rd call: err %v after %d calls and %v; want nil after 3 and 20ms", err, calls, time.Since(start))
		}
		start, calls = time.Now(), 0
		err = p.Await(time.Second, 300*time.Millisecond, func() (bool, error) { calls++; return false, nil })
		// Called at 0, 300, 600, 900 and 1200 ms: past the deadline at
		// the 5th, not before.
		if !errors.Is(err, ErrNotReady) || calls != 5 || time.Since(start) != 1200*time.Millisecond {
			t.Fatalf("never ready: err %v after %d calls and %v; want ErrNotReady after 5 and 1.2s", err, calls, time.Since(start))
		}
		close(p.done)
		calls = 0
		if err := p.Await(time.Second, time.Millisecond, func() (bool, error) { calls++; return true, nil }); err != nil || calls != 1 {
			t.Fatalf("ready at once after the exit: err %v after %d calls; want nil after 1 (ready is asked first)", err, calls)
		}
		if err := p.Await(time.Second, time.Millisecond, func() (bool, error) { return false, nil }); !errors.Is(err, ErrExited) {
			t.Fatalf("exited: %v; want ErrExited", err)
		}
	})
}

func TestFreePort(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if port <= 0 || port > 65535 {
		t.Fatalf("FreePort = %d", port)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("listen on FreePort's port: %v", err)
	}
	l.Close()
}

// fakeTB records how Missing ends a test; Skip and Fatal end the calling
// goroutine, as testing's do.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skip(args ...any) {
	f.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fakeTB) Fatal(args ...any) {
	f.failed = fmt.Sprint(args...)
	runtime.Goexit()
}

func missing(env string) *fakeTB {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Missing(f, env, "frob not installed: install it")
		f.failed = "Missing returned"
	}()
	<-done
	return f
}

func TestMissing(t *testing.T) {
	const env = "RETRYKIT_TESTPROC_REQUIRE_FROB"
	for _, tc := range []struct {
		val           string
		skip, failure string
	}{
		{"", "frob not installed: install it", ""},
		{"0", "frob not installed: install it", ""},
		{"true", "frob not installed: install it", ""},
		{"1", "", "frob not installed: install it (RETRYKIT_TESTPROC_REQUIRE_FROB=1 makes it required)"},
	} {
		t.Run("env="+tc.val, func(t *testing.T) {
			t.Setenv(env, tc.val)
			f := missing(env)
			if f.skipped != tc.skip || f.failed != tc.failure {
				t.Fatalf("Missing: skipped %q, failed %q; want skipped %q, failed %q", f.skipped, f.failed, tc.skip, tc.failure)
			}
		})
	}
	// With a real test: skipped, not failed.
	t.Setenv(env, "")
	var sub *testing.T
	t.Run("real", func(t *testing.T) {
		sub = t
		Missing(t, env, "frob not installed")
		t.Error("Missing returned")
	})
	if !sub.Skipped() || sub.Failed() {
		t.Fatalf("a real test: skipped %v, failed %v; want skipped only", sub.Skipped(), sub.Failed())
	}
}

// readPid reads the pid a helper prints.
func readPid(t *testing.T, r *os.File) int {
	t.Helper()
	r.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the helper's child pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
