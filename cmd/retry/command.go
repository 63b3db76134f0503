package main

import (
	"context"
	"errors"
	"io"
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
// between SIGTERM and SIGKILL.
const killGrace = 2 * time.Second

// cmdStatus is an attempt's non-zero exit status.
type cmdStatus struct {
	code    int
	timeout time.Duration // non-zero: stopped by --attempt-timeout
}

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
	st := &signalState{}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
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
					st.running.Process.Signal(s)
				}
				st.mu.Unlock()
				cancel()
			case <-stopSigs:
				return
			}
		}
	}()

	p.Retryable = func(err error) bool {
		var cs *cmdStatus
		return errors.As(err, &cs) && (codes == nil || codes[cs.code])
	}
	p.Observer = retry.ObserverFunc(func(_ context.Context, ev retry.Event) {
		if ev.Kind == retry.EventRetry {
			rep.retrying(ev, ev.Err.Error())
		}
	})
	rep.infof("%s", describe(p))
	last := 0
	attempt := 0
	err := retry.Do(ctx, p, func(ctx context.Context) error {
		rep.endWait()
		if err := ctx.Err(); err != nil {
			return err
		}
		attempt++
		c := exec.Command(args[0], args[1:]...)
		if attempt == 1 {
			c.Stdin = stdin
		} // later attempts: nil Stdin is /dev/null
		c.Stdout, c.Stderr = stdout, stderr
		rep.infof("attempt %d: running %s", attempt, strings.Join(args, " "))
		st.mu.Lock()
		if st.sig != nil {
			st.mu.Unlock()
			return ctx.Err()
		}
		err := c.Start()
		if err == nil {
			st.running = c
		}
		st.mu.Unlock()
		if err != nil {
			last = exitNotExec
			if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
				last = exitNotFound
			}
			return retry.Permanent(&exitError{code: last, msg: err.Error()})
		}
		// --attempt-timeout: stop the command when its attempt's deadline
		// passes (SIGTERM, then SIGKILL after a grace period).
		var timedOut atomic.Bool
		waited := make(chan struct{})
		go func() {
			select {
			case <-ctx.Done():
				if ctx.Err() != context.DeadlineExceeded {
					return // a signal: already forwarded
				}
				timedOut.Store(true)
				c.Process.Signal(syscall.SIGTERM)
				select {
				case <-time.After(killGrace):
					c.Process.Kill()
				case <-waited:
				}
			case <-waited:
			}
		}()
		err = c.Wait()
		close(waited)
		st.mu.Lock()
		st.running = nil
		st.mu.Unlock()
		if err == nil {
			last = 0
			return nil
		}
		var xe *exec.ExitError
		if !errors.As(err, &xe) {
			last = 1
			return retry.Permanent(&exitError{code: 1, msg: err.Error()})
		}
		ws, _ := xe.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			last = 128 + int(ws.Signal())
		} else {
			last = xe.ExitCode()
		}
		if timedOut.Load() {
			return &cmdStatus{code: last, timeout: p.AttemptTimeout}
		}
		return &cmdStatus{code: last}
	})
	rep.endWait()
	if err == nil {
		if attempt > 1 {
			rep.infof("attempt %d succeeded", attempt)
		}
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return &exitError{code: ee.code, msg: strings.TrimPrefix(ee.msg, "exec: ")}
	}
	st.mu.Lock()
	sig, duringRun := st.sig, st.duringRun
	st.mu.Unlock()
	if sig != nil && !duringRun {
		code := exitSIGINT
		if sig == syscall.SIGTERM {
			code = exitSIGTERM
		}
		rep.noticef("interrupted by %v while waiting; not retrying", sig)
		return &exitError{code: code}
	}
	var re *retry.Error
	if errors.As(err, &re) && sig == nil {
		if re.Reason == retry.ReasonPermanent {
			rep.noticef("attempt %d failed (exit %d), not a retryable exit code; giving up", re.Attempts, last)
		} else {
			rep.noticef("giving up after %d attempts in %s (%s); last exit %d", re.Attempts, fmtWait(re.Elapsed), re.Reason, last)
		}
	}
	if last == 0 { // the command succeeded at last despite a signal
		return nil
	}
	return &exitError{code: last}
}
