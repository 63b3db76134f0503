package retry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/retrytest"
)

// lines returns the recorded events as comparable lines.
func lines(r *retrytest.Recorder) []string {
	var out []string
	for _, e := range r.Events() {
		err := "<nil>"
		if e.Err != nil {
			err = e.Err.Error()
		}
		out = append(out, fmt.Sprintf("%v attempt=%d/%d delay=%v waited=%v elapsed=%v reason=%d err=%s",
			e.Kind, e.Attempt, e.MaxAttempts, e.Delay, e.Waited, e.Elapsed, e.Reason, err))
	}
	return out
}

// driveLoop runs op through a Loop by hand, as an integration would.
func driveLoop(ctx context.Context, p *retry.Policy, op func(context.Context) error) error {
	l := p.Loop()
	if err := ctx.Err(); err != nil {
		return err // Do's own case; not exercised below
	}
	for {
		actx, err := l.Begin(ctx)
		if err == nil {
			err = op(actx)
		}
		if err == nil {
			l.Succeeded(ctx)
			return nil
		}
		if _, stop := l.Failed(ctx, err); stop != nil {
			return stop
		}
		if stop := l.Wait(ctx); stop != nil {
			return stop
		}
	}
}

// TestLoopIsDo: a loop driven by hand through the seam gives the events,
// log lines, waits and final error that Do gives, for every stop rule.
func TestLoopIsDo(t *testing.T) {
	errSlow := retry.ServerWait(errTransient, 3*time.Second)
	cases := []struct {
		name   string
		policy func() retry.Policy
		ctx    func(context.Context) (context.Context, context.CancelFunc)
		op     func(n int) error // n: 1-based call of op
	}{
		{name: "attempts", policy: func() retry.Policy { return retry.Policy{Jitter: retry.NoJitter(), MaxAttempts: 4} },
			op: func(int) error { return errTransient }},
		{name: "success after failures", policy: func() retry.Policy { return retry.Policy{Jitter: retry.NoJitter()} },
			op: func(n int) error {
				if n < 3 {
					return errTransient
				}
				return nil
			}},
		{name: "permanent", policy: func() retry.Policy { return retry.Policy{Jitter: retry.NoJitter()} },
			op: func(n int) error {
				if n == 2 {
					return retry.Permanent(errTransient)
				}
				return errTransient
			}},
		{name: "server wait and time budget", policy: func() retry.Policy {
			return retry.Policy{Jitter: retry.NoJitter(), MaxElapsed: 5 * time.Second}
		}, op: func(int) error { return errSlow }},
		{name: "deadline", policy: func() retry.Policy { return retry.Policy{Jitter: retry.NoJitter(), MaxAttempts: retry.Unlimited} },
			ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
				return context.WithTimeout(ctx, 10*time.Second)
			},
			op: func(int) error { return errTransient }},
		{name: "cancel during wait", policy: func() retry.Policy { return retry.Policy{Jitter: retry.NoJitter()} },
			ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(ctx)
				time.AfterFunc(2500*time.Millisecond, cancel)
				return ctx, cancel
			},
			op: func(int) error { return errTransient }},
		{name: "attempt timeout", policy: func() retry.Policy {
			return retry.Policy{Jitter: retry.NoJitter(), AttemptTimeout: time.Second, MaxAttempts: 3}
		}, op: func(int) error { time.Sleep(2 * time.Second); return context.DeadlineExceeded }},
		{name: "budget", policy: func() retry.Policy {
			b, _ := retry.NewBudget(retry.BudgetConfig{Ratio: 0.5, MinPerSecond: -1})
			return retry.Policy{Jitter: retry.NoJitter(), Budget: b}
		}, op: func(int) error { return errTransient }},
		{name: "throttle", policy: func() retry.Policy {
			// Every attempt rejected, so that Do and the Loop draw alike:
			// the rule's own rejections are random (at most 0.9).
			th, _ := retry.NewThrottle(retry.ThrottleConfig{K: 1})
			th.Override(retry.ThrottleRejectAll)
			return retry.Policy{Initial: retry.Immediate, Throttle: th, MaxAttempts: 6}
		}, op: func(int) error { return retry.ServerWait(errTransient, time.Millisecond) }},
		{name: "retryable", policy: func() retry.Policy {
			return retry.Policy{Jitter: retry.NoJitter(), Retryable: func(err error) bool { return !errors.Is(err, context.Canceled) }}
		}, op: func(n int) error {
			if n == 3 {
				return context.Canceled
			}
			return errTransient
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := func(drive func(context.Context, *retry.Policy, func(context.Context) error) error) (events, logs []string, calls []time.Duration, err error) {
				synctest.Test(t, func(t *testing.T) {
					var log retrytest.Recorder
					var buf bytes.Buffer
					p := tc.policy()
					p.Observer = &log
					p.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug,
						ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
							if a.Key == slog.TimeKey {
								return slog.Attr{}
							}
							return a
						}}))
					ctx := t.Context()
					if tc.ctx != nil {
						var cancel context.CancelFunc
						ctx, cancel = tc.ctx(ctx)
						defer cancel()
					}
					start := time.Now()
					err = drive(ctx, &p, func(ctx context.Context) error {
						calls = append(calls, time.Since(start))
						return tc.op(len(calls))
					})
					events, logs = lines(&log), []string{buf.String()}
				})
				return
			}
			doEvents, doLogs, doCalls, doErr := run(func(ctx context.Context, p *retry.Policy, op func(context.Context) error) error {
				return retry.Do(ctx, *p, op)
			})
			lEvents, lLogs, lCalls, lErr := run(driveLoop)
			if fmt.Sprint(doErr) != fmt.Sprint(lErr) {
				t.Errorf("error: Do %v, Loop %v", doErr, lErr)
			}
			var de, le *retry.Error
			if errors.As(doErr, &de) != errors.As(lErr, &le) || de != nil && (de.Reason != le.Reason || de.Attempts != le.Attempts || de.Elapsed != le.Elapsed) {
				t.Errorf("*Error: Do %+v, Loop %+v", de, le)
			}
			if !slices.Equal(doEvents, lEvents) {
				t.Errorf("events:\nDo   %q\nLoop %q", doEvents, lEvents)
			}
			if !slices.Equal(doLogs, lLogs) {
				t.Errorf("log:\nDo   %q\nLoop %q", doLogs, lLogs)
			}
			if !slices.Equal(doCalls, lCalls) {
				t.Errorf("calls at: Do %v, Loop %v", doCalls, lCalls)
			}
			if len(doEvents) == 0 {
				t.Error("no events: the case tests nothing")
			}
		})
	}
}

// TestLoopClientWaits: a client whose own loop waits (gax, valkey-go) takes
// the wait from Failed; the next Begin counts it as waited.
func TestLoopClientWaits(t *testing.T) {
	var log retrytest.Recorder
	p := retry.Policy{Jitter: retry.NoJitter(), MaxAttempts: 3, Observer: &log}
	l := p.Loop()
	ctx := context.Background()
	if _, err := l.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	d, stop := l.Failed(ctx, errTransient)
	if stop != nil || d != time.Second {
		t.Fatalf("Failed = %v, %v; want 1s, nil", d, stop)
	}
	// The client sleeps d itself.
	if _, err := l.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	l.Succeeded(ctx)
	want := "done attempt=2/3 delay=0s waited=1s elapsed=0s reason=0 err=<nil>"
	if got := lines(&log)[len(lines(&log))-1]; got != want {
		t.Errorf("last event %q, want %q", got, want)
	}
	if l.Attempts() != 2 {
		t.Errorf("Attempts() = %d, want 2", l.Attempts())
	}
}

// TestLoopSentAndUnseen: Sent counts an attempt the client did not ask for
// without asking the Throttle; Unseen keeps its outcome from the Throttle;
// an attempt reported without Begin counts.
func TestLoopSentAndUnseen(t *testing.T) {
	th, _ := retry.NewThrottle(retry.ThrottleConfig{K: 1})
	for range 100 {
		account.Record(th, false) // the Throttle now rejects most attempts
	}
	b, _ := retry.NewBudget(retry.BudgetConfig{})
	var log retrytest.Recorder
	p := retry.Policy{Initial: retry.Immediate, Throttle: th, Budget: b, Observer: &log}
	l := p.Loop()
	ctx := context.Background()
	req, acc := th.LocalCounts()
	l.Sent(ctx)
	l.Unseen()
	if _, stop := l.Failed(ctx, errTransient); stop != nil {
		t.Fatal(stop)
	}
	if r, a := th.LocalCounts(); r != req || a != acc {
		t.Errorf("Throttle counts went from %d/%d to %d/%d: Sent asked it or Unseen told it", req, acc, r, a)
	}
	if first, _ := b.LocalCounts(); first != 1 {
		t.Errorf("Budget counted %d first attempts, want 1", first)
	}
	if lines(&log)[0] != "attempt attempt=1/10 delay=0s waited=0s elapsed=0s reason=0 err=<nil>" {
		t.Errorf("first event %q", lines(&log)[0])
	}

	q := retry.Policy{Jitter: retry.NoJitter()}
	m := q.Loop()
	if _, stop := m.Failed(ctx, errTransient); stop != nil || m.Attempts() != 1 {
		t.Errorf("an attempt reported without Begin: stop %v, Attempts %d; want nil, 1", stop, m.Attempts())
	}
}

// TestLoopRecord: Record tells the Throttle once, before Failed.
func TestLoopRecord(t *testing.T) {
	th, _ := retry.NewThrottle(retry.ThrottleConfig{})
	p := retry.Policy{Initial: retry.Immediate, Throttle: th}
	l := p.Loop()
	ctx := context.Background()
	if _, err := l.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	l.Record(retry.ServerWait(errOverload{}, 0))
	if _, stop := l.Failed(ctx, errOverload{}); stop != nil {
		t.Fatal(stop)
	}
	if r, a := th.LocalCounts(); r != 1 || a != 0 {
		t.Errorf("Throttle counted %d requests, %d accepts; want 1, 0", r, a)
	}
}

type errOverload struct{}

func (errOverload) Error() string    { return "overloaded" }
func (errOverload) Overloaded() bool { return true }

// TestLoopEnded: a client that learns of the context's end from an error
// ends the loop with ReasonContext and that cause.
func TestLoopEnded(t *testing.T) {
	var log retrytest.Recorder
	p := retry.Policy{Observer: &log}
	l := p.Loop()
	ctx := context.Background()
	l.Sent(ctx)
	err := l.Ended(ctx, errTransient, context.Canceled)
	var re *retry.Error
	if !errors.As(err, &re) || re.Reason != retry.ReasonContext || !errors.Is(err, context.Canceled) || !errors.Is(err, errTransient) || re.Attempts != 1 {
		t.Fatalf("Ended = %#v", err)
	}
	if got := lines(&log)[len(lines(&log))-1]; got[:4] != "done" {
		t.Errorf("last event %q, want done", got)
	}
}

// TestLoopSuccessAllocatesNothing: a Loop on the stack, with every hook,
// allocates nothing on a call that succeeds at once.
func TestLoopSuccessAllocatesNothing(t *testing.T) {
	b, _ := retry.NewBudget(retry.BudgetConfig{})
	th, _ := retry.NewThrottle(retry.ThrottleConfig{})
	p := &retry.Policy{Budget: b, Throttle: th, Observer: retry.ObserverFunc(func(context.Context, retry.Event) {})}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		l := p.Loop()
		if _, err := l.Begin(ctx); err == nil {
			l.Succeeded(ctx)
		}
	}); n != 0 {
		t.Errorf("%v allocs per call, want 0", n)
	}
}

// TestLoopUntil: a time budget set during the call ends it as MaxElapsed
// does, with ReasonTimeBudget, before a wait that would pass it.
func TestLoopUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := retry.Policy{Jitter: retry.NoJitter()}
		l := p.Loop()
		ctx := t.Context()
		l.Until(time.Now().Add(2 * time.Second))
		if d, stop := l.Failed(ctx, errTransient); stop != nil || d != time.Second {
			t.Fatalf("Failed = %v, %v; want 1s, nil", d, stop)
		}
		if err := l.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		_, stop := l.Failed(ctx, errTransient) // the 2 s wait would end at 3 s
		var re *retry.Error
		if !errors.As(stop, &re) || re.Reason != retry.ReasonTimeBudget || re.Attempts != 2 {
			t.Fatalf("stop = %v, want ReasonTimeBudget after 2 attempts", stop)
		}
	})
}
