package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/retrykit/retry"
)

// parseExitCodes reads --on-exit: comma-separated codes 1..255 and ranges
// such as 100-110. Empty means nil (retry on any non-zero status).
func parseExitCodes(s string) (map[int]bool, error) {
	if s == "" {
		return nil, nil
	}
	codes := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		a, b, isRange := strings.Cut(strings.TrimSpace(part), "-")
		lo, err1 := strconv.Atoi(a)
		hi, err2 := lo, error(nil)
		if isRange {
			hi, err2 = strconv.Atoi(b)
		}
		if err1 != nil || err2 != nil || lo < 1 || hi > 255 || lo > hi {
			return nil, usagef("--on-exit %q: want exit codes 1..255 or ranges such as 100-110, separated by commas", s)
		}
		for c := lo; c <= hi; c++ {
			codes[c] = true
		}
	}
	return codes, nil
}

// killGrace is how long a command that overran --attempt-timeout has
// between SIGTERM and SIGKILL: 2 s. The tests build the binary with a
// shorter one (-ldflags -X main.killGraceOverride=300ms), so as not to
// wait for it; a release build has no way to change it.
var killGrace = 2 * time.Second

// killGraceOverride, when set at link time to a positive duration, replaces
// killGrace. Empty in every build but the tests'.
var killGraceOverride string

func init() {
	if d, err := time.ParseDuration(killGraceOverride); err == nil && d > 0 {
		killGrace = d
	}
}

// cmdStatus is an attempt's non-zero exit status.
type cmdStatus struct {
	code    int
	timeout time.Duration // non-zero: stopped by --attempt-timeout
}

// errNotStarted is the failure of an attempt whose time was up before the
// command could be started; retry then exits 1 if it gives up.
var errNotStarted = errors.New("not started: no time left")

func (e *cmdStatus) Error() string {
	if e.timeout > 0 {
		return "timed out after " + e.timeout.String()
	}
	return "exit " + strconv.Itoa(e.code)
}

// signalState tracks signals for the command mode: which arrived, and
// whether a command was running then.
type signalState struct {
	mu        sync.Mutex
	sig       os.Signal
	running   *exec.Cmd
	duringRun bool
}

// runCommand runs args until it succeeds or p gives up, and returns nil or
// an *exitError with the command's last status.
func runCommand(ctx context.Context, p retry.Policy, pf *policyFlags, codes map[int]bool, args []string,
	stdin io.Reader, stdout, stderr io.Writer) error {
	rep := newReporter(stderr, pf)
	defer rep.endWait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jc := newJobControl()
	defer jc.close()
	st := &signalState{}
	sigs := make(chan os.Signal, 2)
	// SIGHUP too: the command runs in a process group of its own, which the
	// SIGHUP a shell sends its jobs when the terminal closes does not reach.
	signal.Notify(sigs, notIgnored(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)...)
	defer signal.Stop(sigs)
	stopSigs := make(chan struct{})
	defer close(stopSigs)
	go func() {
		for {
			select {
			case s := <-sigs:
				st.mu.Lock()
				if st.sig == nil {
					st.sig = s
				}
				if st.running != nil {
					st.duringRun = true
					jc.signal(st.running.Process.Pid, s.(syscall.Signal))
				}
				cancel() // before unlocking: an attempt that sees st.sig sees ctx cancelled
				st.mu.Unlock()
			case <-stopSigs:
				return
			}
		}
	}()

	p.Retryable = func(err error) bool {
		var cs *cmdStatus
		return errors.As(err, &cs) && (codes == nil || codes[cs.code])
	}
	rep.failure = func(err error) string { return err.Error() }
	rep.attempt = func(n int) string { return fmt.Sprintf("attempt %d: running %s", n, strings.Join(args, " ")) }
	p.Observer = rep
	rep.infof("%s", describe(p))
	last := 0
	attempt := 0
	var interrupted os.Signal // SIGINT or SIGQUIT when the last attempt was interrupted (killed by it, or exit 130)
	lastTimedOut := false
	notStarted := false // the last attempt had no time left to start the command
	start := time.Now()
	err := retry.Do(ctx, p, func(ctx context.Context) error {
		rep.endWait()
		if err := ctx.Err(); err != nil {
			if err != context.DeadlineExceeded {
				return err // a signal
			}
			// The attempt's time (what --max-elapsed left it) is up before
			// it starts: the command is not started, and the attempt
			// fails as timed out.
			last, lastTimedOut, notStarted = 1, false, true
			return errNotStarted
		}
		notStarted = false
		attempt++
		c := exec.Command(args[0], args[1:]...)
		if attempt == 1 {
			c.Stdin = stdin
		} // later attempts: nil Stdin is /dev/null
		c.Stdout, c.Stderr = stdout, stderr
		jc.prepare(c)
		st.mu.Lock()
		if st.sig != nil {
			st.mu.Unlock()
			return context.Canceled
		}
		err := c.Start()
		if err == nil {
			st.running = c
		}
		st.mu.Unlock()
		if err != nil {
			last = exitNotExec
			if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) || args[0] == "" {
				last = exitNotFound
			}
			return retry.Permanent(&exitError{code: last, msg: startError(args[0], err)})
		}
		// --attempt-timeout: stop the command's whole process group when
		// its attempt's deadline passes (SIGTERM, then SIGKILL after a grace
		// period), and wait until the group is gone before going on.
		var timedOut atomic.Bool
		var killAt time.Time // set before timedOut
		waited := make(chan struct{})
		pid := c.Process.Pid
		go func() {
			select {
			case <-ctx.Done():
				if ctx.Err() != context.DeadlineExceeded {
					return // a signal: already forwarded
				}
				killAt = time.Now().Add(killGrace)
				timedOut.Store(true)
				jc.signal(pid, syscall.SIGTERM)
				select {
				case <-time.After(killGrace):
					jc.signal(pid, syscall.SIGKILL)
				case <-waited:
				}
			case <-waited:
			}
		}()
		err = jc.wait(c)
		st.mu.Lock()
		st.running = nil
		st.mu.Unlock()
		if timedOut.Load() {
			jc.awaitGroup(pid, killAt)
		}
		close(waited)
		lastTimedOut = false
		if err == nil && !timedOut.Load() {
			last = 0
			return nil
		}
		if err == nil {
			// Stopped by --attempt-timeout, the command handled the SIGTERM
			// and exited 0: it did not finish in time, the attempt failed.
			last = 0
			lastTimedOut = true
			return &cmdStatus{code: 0, timeout: p.AttemptTimeout}
		}
		var xe *exec.ExitError
		if !errors.As(err, &xe) {
			last = 1
			return retry.Permanent(&exitError{code: 1, msg: err.Error()})
		}
		ws, _ := xe.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			last = 128 + int(ws.Signal())
			if s := ws.Signal(); s == syscall.SIGINT || s == syscall.SIGQUIT {
				// What Ctrl-C and Ctrl-\ do to a command that has the
				// terminal: the user stopped it; never retried.
				interrupted = ws.Signal()
				return retry.Permanent(&cmdStatus{code: last})
			}
		} else {
			last = xe.ExitCode()
			if last == 128+int(syscall.SIGINT) && !timedOut.Load() && !codes[last] {
				// The conventional status of a command that handled
				// Ctrl-C and exited: interrupted too (unless --on-exit
				// lists it).
				interrupted = syscall.SIGINT
				return retry.Permanent(&cmdStatus{code: last})
			}
		}
		if timedOut.Load() {
			lastTimedOut = true
			return &cmdStatus{code: last, timeout: p.AttemptTimeout}
		}
		return &cmdStatus{code: last}
	})
	rep.endWait()
	elapsed := time.Since(start).Milliseconds()
	if err == nil {
		if attempt > 1 {
			rep.result(slog.LevelDebug, fmt.Sprintf("attempt %d succeeded", attempt), "succeeded",
				"attempts", attempt, "elapsed_ms", elapsed, "exit_code", 0)
		}
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		msg := "cannot run the command"
		if ee.code != exitNotFound && ee.code != exitNotExec {
			msg = "the command could not be waited for"
		}
		return rep.fail(ee.code, ee.msg, msg, "command", args[0], "error", ee.msg, "attempts", attempt, "elapsed_ms", elapsed)
	}
	exit := last
	if last == 0 && lastTimedOut {
		// The last attempt timed out, and its command exited 0 on the
		// SIGTERM: report the SIGTERM, which it would have died of.
		exit = 128 + int(syscall.SIGTERM)
	}
	st.mu.Lock()
	sig, duringRun := st.sig, st.duringRun
	st.mu.Unlock()
	if sig != nil && !duringRun {
		code := 128 + int(sig.(syscall.Signal)) // exitSIGINT, exitSIGTERM, or 129 for SIGHUP
		name := signalName(sig)
		rep.result(slog.LevelInfo, fmt.Sprintf("interrupted by %s while waiting; not retrying", name), "interrupted",
			"signal", name, "attempts", attempt, "elapsed_ms", elapsed, "exit_code", code)
		return &exitError{code: code}
	}
	var re *retry.Error
	if interrupted != nil && sig == nil {
		name := signalName(interrupted)
		rep.result(slog.LevelInfo, fmt.Sprintf("attempt %d was interrupted by %s; not retrying", attempt, name), "interrupted",
			"signal", name, "attempts", attempt, "elapsed_ms", elapsed, "exit_code", exit)
	} else if errors.As(err, &re) && sig == nil {
		how := fmt.Sprintf("exit %d", last)
		if lastTimedOut {
			how = fmt.Sprintf("timed out after %s, exit %d", p.AttemptTimeout, last)
		} else if notStarted {
			how = errNotStarted.Error()
		}
		text := fmt.Sprintf("giving up after %s in %s (%s); last attempt: %s", plural(re.Attempts, "attempt"), fmtWait(time.Since(start)), re.Reason, how)
		if re.Reason == retry.ReasonPermanent {
			text = fmt.Sprintf("attempt %d failed (exit %d), not a retryable exit code; giving up", re.Attempts, last)
		}
		rep.result(slog.LevelInfo, text, "giving up", "attempts", re.Attempts, "elapsed_ms", elapsed,
			"reason", re.Reason.String(), "exit_code", exit, "last_attempt", how)
	}
	if exit == 0 { // the command succeeded at last despite a signal
		return nil
	}
	return &exitError{code: exit}
}

// signalName is the conventional name of a signal retry handles ("SIGINT"),
// where Go's String says "interrupt".
func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return s.String()
}

// startError words the error of a command that could not be started as a
// shell does: the command and why, without Go's "fork/exec" or "exec:".
func startError(name string, err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	if name == "" {
		name = `""`
	}
	if errors.Is(err, exec.ErrNotFound) {
		return name + ": command not found"
	}
	var xe *exec.Error
	if errors.As(err, &xe) {
		return name + ": " + xe.Err.Error()
	}
	return err.Error()
}
