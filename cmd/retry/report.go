package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/retrykit/retry"
	"golang.org/x/term"
)

// reporter prints what the retry loop does on stderr: a live countdown
// rewritten in place when stderr is a terminal (text format), plain lines
// otherwise, or slog JSON objects with --log-format json.
type reporter struct {
	w       io.Writer
	tty     bool
	quiet   bool
	verbose bool
	log     *slog.Logger // json format only

	// Set by the subcommand before the reporter observes a loop:
	failure func(error) string       // describes a failed attempt's error in the retry line
	hint    func(retry.Event) string // names the server hint that set a retry's wait ("RateLimit t=2"), or ""; nil: none
	attempt func(n int) string       // with -v, the line printed as attempt n starts; nil: none

	mu     sync.Mutex
	reason retry.Reason  // of the last EventDone
	stop   chan struct{} // closes the running countdown
	done   chan struct{} // closed when the countdown has erased its line
}

// Observe makes the reporter the retry loop's Observer (Policy.Observer),
// the one way the CLI learns what the loop does: each attempt (a line with
// -v, when r.attempt is set) and each retry (the retry line or countdown).
// It is called on the loop's goroutine.
func (r *reporter) Observe(_ context.Context, ev retry.Event) {
	switch ev.Kind {
	case retry.EventAttempt:
		if r.attempt != nil && r.verbose {
			r.infof("%s", r.attempt(ev.Attempt))
		}
	case retry.EventRetry:
		r.retrying(ev, r.failure(ev.Err))
	case retry.EventDone:
		r.mu.Lock()
		r.reason = ev.Reason
		r.mu.Unlock()
	}
}

// lastReason is the Reason of the last call the reporter saw end: why it
// gave up, zero if it succeeded or none ended.
func (r *reporter) lastReason() retry.Reason {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reason
}

func newReporter(w io.Writer, pf *policyFlags) *reporter {
	r := &reporter{w: w, quiet: pf.quiet, verbose: pf.verbose}
	if pf.logFormat == "json" {
		level := slog.LevelInfo
		if pf.verbose {
			level = slog.LevelDebug
		}
		r.log = slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
		return r
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb" {
		r.tty = true
	}
	return r
}

// attemptLabel is "attempt 3/10" or "attempt 3" when unlimited.
func attemptLabel(n, max int) string {
	if max == retry.Unlimited {
		return "attempt " + strconv.Itoa(n)
	}
	return "attempt " + strconv.Itoa(n) + "/" + strconv.Itoa(max)
}

// plural is "1 attempt", "2 attempts".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// fmtWait rounds a wait for display: 3.4s, 250ms, 0s.
func fmtWait(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// retrying reports that an attempt failed (what says how) and that a wait
// of ev.Delay starts. It returns at once.
func (r *reporter) retrying(ev retry.Event, what string) {
	r.endWait()
	if r.quiet {
		return
	}
	what = escapeLine(what)
	label := attemptLabel(ev.Attempt, ev.MaxAttempts)
	hint, why := "", ""
	if r.hint != nil {
		if hint = escapeLine(r.hint(ev)); hint != "" {
			why = " (" + hint + ")"
		}
	}
	if r.log != nil {
		fields := []any{"attempt", ev.Attempt, "max_attempts", ev.MaxAttempts,
			"failure", what, "delay_ms", ev.Delay.Milliseconds(), "elapsed_ms", ev.Elapsed.Milliseconds()}
		if hint != "" {
			fields = append(fields, "hint", hint)
		}
		r.log.Info("retrying", fields...)
		return
	}
	if !r.tty || ev.Delay <= 0 {
		fmt.Fprintf(r.w, "retry: %s failed (%s); retrying in %s%s\n", label, what, fmtWait(ev.Delay), why)
		return
	}
	stop, done := make(chan struct{}), make(chan struct{})
	r.mu.Lock()
	r.stop, r.done = stop, done
	r.mu.Unlock()
	end := time.Now().Add(ev.Delay)
	draw := func() {
		left := max(time.Until(end), 0)
		fmt.Fprintf(r.w, "\r\x1b[Kretry: %s failed (%s); retrying in %s%s", label, what, fmtWait(left), why)
	}
	draw()
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				// Keep a record of the wait in the scrollback.
				fmt.Fprintf(r.w, "\r\x1b[Kretry: %s failed (%s); waited %s%s\n", label, what, fmtWait(ev.Delay-max(time.Until(end), 0)), why)
				return
			case <-t.C:
				draw()
			}
		}
	}()
}

// endWait stops a running countdown and waits until its line is final.
func (r *reporter) endWait() {
	r.mu.Lock()
	stop, done := r.stop, r.done
	r.stop, r.done = nil, nil
	r.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// infof prints a line only with --verbose. Like every line the reporter
// prints, its control characters are escaped (escapeLine): messages quote
// what servers sent.
func (r *reporter) infof(format string, a ...any) {
	if !r.verbose {
		return
	}
	r.endWait()
	msg := escapeLine(fmt.Sprintf(format, a...))
	if r.log != nil {
		r.log.Debug(msg)
		return
	}
	fmt.Fprintln(r.w, "retry: "+msg)
}

// result prints the last line of a run (success, giving up, an
// interruption): "retry: " + text in the text format; in the json format a
// record whose msg is msg, with fields (key, value pairs such as
// "attempts", 3). At slog.LevelDebug it is printed only with --verbose, at
// slog.LevelInfo unless --quiet. Its strings are escaped (escapeLine).
func (r *reporter) result(level slog.Level, text, msg string, fields ...any) {
	r.endWait()
	if r.quiet || level < slog.LevelInfo && !r.verbose {
		return
	}
	if r.log != nil {
		r.log.Log(context.Background(), level, msg, escapeFields(fields)...)
		return
	}
	fmt.Fprintln(r.w, "retry: "+escapeLine(text))
}

// fail returns the error that ends a run with exit status code, whatever
// --quiet says: in the text format main prints text as its one line
// ("retry: " + text); in the json format the reporter logs a record at
// level ERROR whose msg is msg, with fields and exit_code, and main prints
// nothing more.
func (r *reporter) fail(code int, text, msg string, fields ...any) error {
	if r.log == nil {
		return &exitError{code: code, msg: text}
	}
	r.endWait()
	r.log.Error(msg, append(escapeFields(fields), "exit_code", code)...)
	return &exitError{code: code}
}

// escapeFields returns fields with every string value escaped
// (escapeLine): they may quote what servers sent.
func escapeFields(fields []any) []any {
	out := make([]any, len(fields), len(fields)+2)
	for i, f := range fields {
		if s, ok := f.(string); ok && i%2 == 1 {
			f = escapeLine(s)
		}
		out[i] = f
	}
	return out
}

// describe summarises a policy for --verbose.
func describe(p retry.Policy) string {
	attempts := "unlimited"
	if n := p.MaxAttempts; n > 0 {
		attempts = strconv.Itoa(n)
	} else if n == 0 {
		attempts = strconv.Itoa(retry.DefaultMaxAttempts)
	}
	lo, hi := p.Bounds(0)
	s := fmt.Sprintf("policy: %s attempts, jitter %v, first wait %s..%s", attempts, p.Jitter, fmtWait(lo), fmtWait(hi))
	if p.MaxElapsed > 0 {
		s += ", time budget " + p.MaxElapsed.String()
	}
	if p.AttemptTimeout > 0 {
		s += ", attempt timeout " + p.AttemptTimeout.String()
	}
	return s
}
