package retry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// retry loop must not leave a timer or a watcher behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errTransient = errors.New("transient")

// failing returns an op that fails n times with err, then succeeds, and
// records the time of each call.
func failing(n int, err error, calls *[]time.Time) func(context.Context) error {
	return func(context.Context) error {
		*calls = append(*calls, time.Now())
		if len(*calls) <= n {
			return err
		}
		return nil
	}
}

func gaps(calls []time.Time) []time.Duration {
	var d []time.Duration
	for i := 1; i < len(calls); i++ {
		d = append(d, calls[i].Sub(calls[i-1]))
	}
	return d
}

func TestExactWaitsWithoutJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Time
		p := retry.Policy{Initial: time.Second, Multiplier: 2, MaxDelay: 4 * time.Second, Jitter: retry.NoJitter(), MaxAttempts: 5}
		err := retry.Do(t.Context(), p, failing(100, errTransient, &calls))
		var re *retry.Error
		if !errors.As(err, &re) || re.Attempts != 5 || re.Reason != retry.ReasonAttempts {
			t.Fatalf("err = %v, want *Error with 5 attempts, ReasonAttempts", err)
		}
		want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}
		if got := gaps(calls); !equalDurations(got, want) {
			t.Fatalf("waits = %v, want %v", got, want)
		}
		if re.Elapsed != 11*time.Second {
			t.Errorf("Elapsed = %v, want 11s", re.Elapsed)
		}
		if !errors.Is(err, errTransient) {
			t.Errorf("errors.Is(err, last error) = false")
		}
	})
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestDefaultPolicyWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Time
		p := retry.Policy{MaxAttempts: 9}
		err := retry.Do(t.Context(), p, failing(100, errTransient, &calls))
		if err == nil {
			t.Fatal("want error")
		}
		if len(calls) != 9 {
			t.Fatalf("calls = %d, want 9", len(calls))
		}
		for n, d := range gaps(calls) {
			lo := time.Second << n
			hi := lo + time.Second
			if lo >= 32*time.Second {
				lo, hi = 32*time.Second, 32*time.Second
			} else if hi > 32*time.Second {
				hi = 32 * time.Second
			}
			if d < lo || d > hi {
				t.Errorf("wait before retry %d = %v, want in [%v, %v]", n, d, lo, hi)
			}
		}
	})
}

func TestDefaultMaxAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Time
		err := retry.Do(t.Context(), retry.Policy{}, failing(100, errTransient, &calls))
		if len(calls) != retry.DefaultMaxAttempts {
			t.Fatalf("calls = %d, want %d (err %v)", len(calls), retry.DefaultMaxAttempts, err)
		}
	})
}

func TestMaxAttemptsOne(t *testing.T) {
	var calls []time.Time
	err := retry.Do(context.Background(), retry.Policy{MaxAttempts: 1}, failing(100, errTransient, &calls))
	if len(calls) != 1 || !errors.Is(err, errTransient) {
		t.Fatalf("calls = %d, err = %v", len(calls), err)
	}
}

func TestSucceedsAfterFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Time
		if err := retry.Do(t.Context(), retry.Policy{}, failing(3, errTransient, &calls)); err != nil {
			t.Fatal(err)
		}
		if len(calls) != 4 {
			t.Fatalf("calls = %d, want 4", len(calls))
		}
	})
}

func TestUnlimitedWithTimeBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Time
		p := retry.Policy{MaxAttempts: retry.Unlimited, Initial: time.Second, MaxDelay: time.Second, Jitter: retry.NoJitter(), MaxElapsed: 100 * time.Second}
		start := time.Now()
		err := retry.Do(t.Context(), p, failing(1000, errTransient, &calls))
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonTimeBudget {
			t.Fatalf("err = %v, want ReasonTimeBudget", err)
		}
		if len(calls) != 100 { // at 0 s, 1 s, … 99 s: one at 100 s would have no time left
			t.Errorf("calls = %d, want 100", len(calls))
		}
		if el := time.Since(start); el > 100*time.Second {
			t.Errorf("ran %v, past the 100s budget", el)
		}
	})
}

func TestTimeBudgetGivesUpWithoutSleeping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Time
		p := retry.Policy{Jitter: retry.NoJitter(), MaxElapsed: 5 * time.Second}
		start := time.Now()
		err := retry.Do(t.Context(), p, failing(1000, errTransient, &calls))
		// Waits 1, 2 fit (3 s); the next, 4 s, would end at 7 s > 5 s: give up at 3 s.
		if el := time.Since(start); el != 3*time.Second {
			t.Errorf("gave up after %v, want 3s (no sleeping into a certain failure)", el)
		}
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonTimeBudget || re.Attempts != 3 {
			t.Fatalf("err = %#v", err)
		}
	})
}

func TestContextDeadlineGivesUpAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		var calls []time.Time
		start := time.Now()
		err := retry.Do(ctx, retry.Policy{Jitter: retry.NoJitter()}, failing(1000, errTransient, &calls))
		// 1+2+4 = 7 s; the next 8 s wait would pass the deadline.
		if el := time.Since(start); el != 7*time.Second {
			t.Errorf("gave up after %v, want 7s", el)
		}
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errTransient) {
			t.Fatalf("err = %v, want DeadlineExceeded and the last error", err)
		}
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonDeadline {
			t.Fatalf("reason = %v", re.Reason)
		}
	})
}

func TestCancelDuringWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var calls []time.Time
		p := retry.Policy{Initial: 32 * time.Second, Jitter: retry.NoJitter()}
		done := make(chan error)
		start := time.Now()
		go func() { done <- retry.Do(ctx, p, failing(1000, errTransient, &calls)) }()
		time.Sleep(time.Second)
		cancel()
		err := <-done
		if el := time.Since(start); el != time.Second {
			t.Errorf("Do returned after %v, want 1s (at the cancel)", el)
		}
		if !errors.Is(err, context.Canceled) || !errors.Is(err, errTransient) {
			t.Fatalf("err = %v, want Canceled and the last error", err)
		}
		if len(calls) != 1 {
			t.Errorf("calls = %d, want 1", len(calls))
		}
	})
}

func TestCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	err := retry.Do(ctx, retry.Policy{}, func(context.Context) error { called = true; return nil })
	if called || !errors.Is(err, context.Canceled) {
		t.Fatalf("called = %v, err = %v", called, err)
	}
}

func TestAttemptTimeoutIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		p := retry.Policy{AttemptTimeout: time.Second, Initial: time.Second, Jitter: retry.NoJitter()}
		err := retry.Do(t.Context(), p, func(ctx context.Context) error {
			n++
			if n < 3 {
				<-ctx.Done() // overrun the attempt timeout
				return ctx.Err()
			}
			return nil
		})
		if err != nil || n != 3 {
			t.Fatalf("err = %v, n = %d, want success at attempt 3", err, n)
		}
	})
}

func TestContextErrorFromOpNotRetried(t *testing.T) {
	n := 0
	err := retry.Do(context.Background(), retry.Policy{}, func(context.Context) error {
		n++
		return context.Canceled
	})
	var re *retry.Error
	if n != 1 || !errors.As(err, &re) || re.Reason != retry.ReasonPermanent {
		t.Fatalf("n = %d, err = %v", n, err)
	}
}

func TestPermanent(t *testing.T) {
	base := errors.New("bad request")
	n := 0
	err := retry.Do(context.Background(), retry.Policy{}, func(context.Context) error {
		n++
		return retry.Permanent(base)
	})
	var re *retry.Error
	if n != 1 || !errors.Is(err, base) || !errors.As(err, &re) || re.Reason != retry.ReasonPermanent {
		t.Fatalf("n = %d, err = %v", n, err)
	}
	if retry.Permanent(nil) != nil {
		t.Error("Permanent(nil) != nil")
	}
	// Permanent wins over Retryable.
	p := retry.Policy{Retryable: func(error) bool { return true }}
	n = 0
	retry.Do(context.Background(), p, func(context.Context) error { n++; return retry.Permanent(base) })
	if n != 1 {
		t.Errorf("Retryable overrode Permanent: %d calls", n)
	}
}

func TestRetryable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fatal := errors.New("fatal")
		n := 0
		p := retry.Policy{Retryable: func(err error) bool { return !errors.Is(err, fatal) }}
		err := retry.Do(t.Context(), p, func(context.Context) error {
			n++
			if n == 3 {
				return fatal
			}
			return errTransient
		})
		if n != 3 || !errors.Is(err, fatal) {
			t.Fatalf("n = %d, err = %v", n, err)
		}
	})
}

func TestAfterServerWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Time
		p := retry.Policy{Jitter: retry.NoJitter()}
		err := retry.Do(t.Context(), p, func(context.Context) error {
			calls = append(calls, time.Now())
			switch len(calls) {
			case 1:
				return retry.ServerWait(errTransient, 10*time.Second) // longer than 1 s: used
			case 2:
				return retry.ServerWait(errTransient, time.Millisecond) // shorter than 2 s: ignored
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := gaps(calls), []time.Duration{10 * time.Second, 2 * time.Second}; !equalDurations(got, want) {
			t.Fatalf("waits = %v, want %v", got, want)
		}
		if d, ok := retry.ServerWaitOf(retry.ServerWait(errTransient, time.Minute)); !ok || d != time.Minute {
			t.Errorf("ServerWaitOf = %v, %v", d, ok)
		}
		if retry.ServerWait(nil, time.Second) != nil {
			t.Error("ServerWait(nil) != nil")
		}
	})
}

func TestAfterThatDoesNotFitGivesUpAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		start := time.Now()
		n := 0
		err := retry.Do(ctx, retry.Policy{}, func(context.Context) error {
			n++
			return retry.ServerWait(errTransient, time.Hour)
		})
		if time.Since(start) != 0 || n != 1 {
			t.Fatalf("slept %v, %d calls: want immediate give-up", time.Since(start), n)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		n = 0
		err = retry.Do(t.Context(), retry.Policy{MaxElapsed: time.Minute}, func(context.Context) error {
			n++
			return retry.ServerWait(errTransient, time.Hour)
		})
		var re *retry.Error
		if n != 1 || !errors.As(err, &re) || re.Reason != retry.ReasonTimeBudget {
			t.Fatalf("n = %d, err = %v", n, err)
		}
	})
}

func TestNestedLoopsDoNotMultiply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			retryExhausted bool
			want           int
		}{{false, 4}, {true, 16}} {
			calls := 0
			inner := retry.Policy{MaxAttempts: 4, Initial: retry.Immediate}
			outer := retry.Policy{MaxAttempts: 4, Initial: retry.Immediate, RetryExhausted: tc.retryExhausted}
			err := retry.Do(t.Context(), outer, func(ctx context.Context) error {
				return retry.Do(ctx, inner, func(context.Context) error { calls++; return errTransient })
			})
			if calls != tc.want {
				t.Errorf("RetryExhausted=%v: %d calls, want %d", tc.retryExhausted, calls, tc.want)
			}
			var re *retry.Error
			if !errors.As(err, &re) || !retry.IsExhausted(err) {
				t.Errorf("err = %v", err)
			}
			if !tc.retryExhausted && re.Reason != retry.ReasonExhausted {
				t.Errorf("reason = %v, want ReasonExhausted", re.Reason)
			}
		}
	})
}

// onRetry is an Observer that passes EventRetry events to f.
func onRetry(f func(retry.Event)) retry.Observer {
	return retry.ObserverFunc(func(_ context.Context, e retry.Event) {
		if e.Kind == retry.EventRetry {
			f(e)
		}
	})
}

func TestRetryEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events []retry.Event
		var calls []time.Time
		p := retry.Policy{Jitter: retry.NoJitter(), MaxAttempts: 4, Observer: onRetry(func(e retry.Event) { events = append(events, e) })}
		retry.Do(t.Context(), p, failing(100, errTransient, &calls))
		if len(events) != 3 {
			t.Fatalf("%d events, want 3", len(events))
		}
		for i, e := range events {
			if e.Attempt != i+1 || e.Delay != time.Second<<i || e.MaxAttempts != 4 || !errors.Is(e.Err, errTransient) {
				t.Errorf("event %d = %+v", i, e)
			}
		}
	})
}

func TestLogger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		var calls []time.Time
		p := retry.Policy{Jitter: retry.NoJitter(), MaxAttempts: 3, Logger: log}
		retry.Do(t.Context(), p, failing(100, errTransient, &calls))
		out := buf.String()
		if got := strings.Count(out, "level=DEBUG"); got != 2 {
			t.Errorf("%d debug lines, want 2:\n%s", got, out)
		}
		for _, want := range []string{"level=ERROR", "attempts=3", "elapsed=3s", `reason="attempts used up"`, "error=transient", "delay=2s"} {
			if !strings.Contains(out, want) {
				t.Errorf("log lacks %q:\n%s", want, out)
			}
		}
	})
}

func TestDoValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		v, err := retry.DoValue(t.Context(), retry.Policy{}, func(context.Context) (string, error) {
			if n++; n < 3 {
				return "", errTransient
			}
			return "ok", nil
		})
		if v != "ok" || err != nil || n != 3 {
			t.Fatalf("v = %q, err = %v, n = %d", v, err, n)
		}
		v, err = retry.DoValue(t.Context(), retry.Policy{MaxAttempts: 2}, func(context.Context) (string, error) {
			return "last", errTransient
		})
		if v != "last" || !errors.Is(err, errTransient) {
			t.Fatalf("v = %q, err = %v", v, err)
		}
	})
}

func TestImmediate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Time
		start := time.Now()
		retry.Do(t.Context(), retry.Policy{Initial: retry.Immediate, MaxAttempts: 5}, failing(100, errTransient, &calls))
		if len(calls) != 5 || time.Since(start) != 0 {
			t.Fatalf("%d calls in %v", len(calls), time.Since(start))
		}
	})
}

func TestSuccessPathAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() {
		retry.Do(ctx, retry.Policy{}, func(context.Context) error { return nil })
	}); n != 0 {
		t.Errorf("Do: %v allocs, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		retry.DoValue(ctx, retry.Policy{}, func(context.Context) (int, error) { return 1, nil })
	}); n != 0 {
		t.Errorf("DoValue: %v allocs, want 0", n)
	}
}

func TestRetryPathAllocatesOnlyTheTimer(t *testing.T) {
	ctx := context.Background()
	p := retry.Policy{Initial: retry.Immediate}
	if n := testing.AllocsPerRun(200, func() {
		k := 0
		retry.Do(ctx, p, func(context.Context) error {
			if k++; k <= 3 {
				return errTransient
			}
			return nil
		})
	}); n != 0 {
		t.Errorf("retry path with zero waits: %v allocs, want 0", n)
	}
	p = retry.Policy{Initial: time.Nanosecond, MaxDelay: time.Nanosecond, Jitter: retry.NoJitter()}
	if n := testing.AllocsPerRun(200, func() {
		k := 0
		retry.Do(ctx, p, func(context.Context) error {
			if k++; k <= 3 {
				return errTransient
			}
			return nil
		})
	}); n > 3 {
		t.Errorf("retry path with waits: %v allocs, want at most one timer (3 allocs)", n)
	}
}

// The default policy's waits: 2^n s plus at most 1 s, capped at 32 s, and
// held at the cap for as long as attempts remain.
func TestDefaultPolicyHeldAtCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Time
		err := retry.Do(t.Context(), retry.Policy{MaxAttempts: 15}, failing(100, errTransient, &calls))
		var re *retry.Error
		if !errors.As(err, &re) || re.Attempts != 15 || len(calls) != 15 {
			t.Fatalf("err = %v, %d calls", err, len(calls))
		}
		var total time.Duration
		for n, d := range gaps(calls) {
			lo := min(time.Second<<n, 32*time.Second)
			hi := min(lo+time.Second, 32*time.Second)
			if d < lo || d > hi {
				t.Errorf("wait before retry %d = %v, want in [%v, %v]", n, d, lo, hi)
			}
			total += d
		}
		if re.Elapsed != total {
			t.Errorf("Elapsed = %v, want the sum of the waits %v", re.Elapsed, total)
		}
	})
}

// A wait that would end exactly at the context's deadline leaves no time for
// the attempt: Do gives up before it.
func TestDeadlineExactlyAtWaitEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		var calls []time.Time
		start := time.Now()
		err := retry.Do(ctx, retry.Policy{Jitter: retry.NoJitter()}, failing(100, errTransient, &calls))
		// Wait 1 s fits (ends at 1 s); the 2 s wait would end at 3 s, the deadline.
		if el := time.Since(start); el != time.Second || len(calls) != 2 {
			t.Fatalf("gave up after %v and %d calls, want 1s and 2", el, len(calls))
		}
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonDeadline || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		// One nanosecond more and the wait fits.
		ctx2, cancel2 := context.WithTimeout(t.Context(), 3*time.Second+1)
		defer cancel2()
		calls = nil
		retry.Do(ctx2, retry.Policy{Jitter: retry.NoJitter()}, failing(100, errTransient, &calls))
		if len(calls) != 3 {
			t.Errorf("deadline 3s+1ns: %d calls, want 3", len(calls))
		}
	})
}

// The deadline passes during an attempt: the attempt's context error is
// not retried and the loop reports the context.
func TestDeadlineDuringAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		n := 0
		err := retry.Do(ctx, retry.Policy{AttemptTimeout: time.Minute}, func(ctx context.Context) error {
			n++
			<-ctx.Done()
			return ctx.Err()
		})
		var re *retry.Error
		if n != 1 || !errors.As(err, &re) || re.Reason != retry.ReasonContext || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("n = %d, err = %v", n, err)
		}
	})
}

// AttemptTimeout: attempts that overrun are retried while the caller's
// context lives, each with a fresh timeout; cancelling the caller during an
// attempt ends the loop.
func TestAttemptTimeoutPerAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var starts []time.Time
		p := retry.Policy{AttemptTimeout: 5 * time.Second, Initial: time.Second, Jitter: retry.NoJitter(), MaxAttempts: 3}
		start := time.Now()
		err := retry.Do(t.Context(), p, func(ctx context.Context) error {
			starts = append(starts, time.Now())
			dl, ok := ctx.Deadline()
			if !ok || dl.Sub(time.Now()) != 5*time.Second {
				t.Errorf("attempt %d: deadline %v, %v; want 5s from now", len(starts), dl, ok)
			}
			<-ctx.Done()
			return ctx.Err()
		})
		// 5 + 1 + 5 + 2 + 5 = 18 s.
		var re *retry.Error
		if el := time.Since(start); el != 18*time.Second || len(starts) != 3 || !errors.As(err, &re) || re.Reason != retry.ReasonAttempts {
			t.Fatalf("after %v, %d attempts: %v", el, len(starts), err)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("last error is not the attempt's DeadlineExceeded: %v", err)
		}

		ctx, cancel := context.WithCancel(t.Context())
		n := 0
		go func() { time.Sleep(2 * time.Second); cancel() }()
		err = retry.Do(ctx, p, func(ctx context.Context) error {
			n++
			<-ctx.Done()
			return ctx.Err()
		})
		if n != 1 || !errors.Is(err, context.Canceled) || !errors.As(err, &re) || re.Reason != retry.ReasonContext {
			t.Fatalf("cancelled during an attempt: n = %d, err = %v", n, err)
		}
	})
}

// Retryable sees every error; a context error returned by op is retried
// when Retryable says so.
func TestRetryableOverridesDefaultClassification(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []error
		p := retry.Policy{MaxAttempts: 3, Initial: retry.Immediate, Retryable: func(err error) bool {
			seen = append(seen, err)
			return true
		}}
		n := 0
		retry.Do(t.Context(), p, func(context.Context) error { n++; return context.DeadlineExceeded })
		if n != 3 || len(seen) != 3 {
			t.Fatalf("n = %d, Retryable called %d times; want 3 and 3 (the last error is classified too)", n, len(seen))
		}
	})
}

func TestRetryEventElapsedAndServerDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events []retry.Event
		p := retry.Policy{Jitter: retry.NoJitter(), MaxAttempts: 3, Observer: onRetry(func(e retry.Event) { events = append(events, e) })}
		n := 0
		retry.Do(t.Context(), p, func(context.Context) error {
			n++
			time.Sleep(time.Second) // each attempt takes 1 s
			return retry.ServerWait(errTransient, 5*time.Second)
		})
		want := []retry.Event{
			{Kind: retry.EventRetry, Attempt: 1, MaxAttempts: 3, Delay: 5 * time.Second, Elapsed: 0},
			{Kind: retry.EventRetry, Attempt: 2, MaxAttempts: 3, Delay: 5 * time.Second, Waited: 5 * time.Second, Elapsed: 6 * time.Second},
		}
		if len(events) != len(want) {
			t.Fatalf("%d events, want %d", len(events), len(want))
		}
		for i, e := range events {
			w := want[i]
			if e.Attempt != w.Attempt || e.MaxAttempts != w.MaxAttempts || e.Delay != w.Delay || e.Waited != w.Waited || e.Elapsed != w.Elapsed || !errors.Is(e.Err, errTransient) {
				t.Errorf("event %d = %+v, want %+v", i, e, w)
			}
		}
		// No EventRetry for a loop that does not retry.
		events = nil
		retry.Do(t.Context(), retry.Policy{MaxAttempts: 1, Observer: p.Observer}, func(context.Context) error { return errTransient })
		retry.Do(t.Context(), p, func(context.Context) error { return nil })
		if len(events) != 0 {
			t.Errorf("%d events without a retry", len(events))
		}
	})
}

// Logging honours the handler's level: at Error only the give-up is logged,
// with its cause when the context ended the loop.
func TestLoggerLevels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError}))
		ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
		defer cancel()
		var calls []time.Time
		retry.Do(ctx, retry.Policy{Jitter: retry.NoJitter(), Logger: log}, failing(100, errTransient, &calls))
		out := buf.String()
		if strings.Contains(out, "level=DEBUG") || strings.Count(out, "level=ERROR") != 1 {
			t.Fatalf("log:\n%s", out)
		}
		for _, want := range []string{`msg="retry: giving up"`, "attempts=2", "elapsed=1s", `reason="next wait would pass the context deadline"`, "error=transient", `cause="context deadline exceeded"`} {
			if !strings.Contains(out, want) {
				t.Errorf("log lacks %q:\n%s", want, out)
			}
		}
		// Success logs nothing.
		buf.Reset()
		log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		calls = nil
		retry.Do(t.Context(), retry.Policy{Initial: retry.Immediate, Logger: log}, failing(0, errTransient, &calls))
		if buf.Len() != 0 {
			t.Errorf("success logged:\n%s", buf.String())
		}
	})
}

// A nested loop that gave up is not retried by the outer loop, even through
// wrapping; RetryExhausted multiplies the calls (4 x 4 = 16).
func TestNestedWrappedExhausted(t *testing.T) {
	calls := 0
	inner := retry.Policy{MaxAttempts: 4, Initial: retry.Immediate}
	outer := retry.Policy{MaxAttempts: 4, Initial: retry.Immediate}
	err := retry.Do(context.Background(), outer, func(ctx context.Context) error {
		err := retry.Do(ctx, inner, func(context.Context) error { calls++; return errTransient })
		return fmt.Errorf("layer 2: %w", err)
	})
	var re *retry.Error
	if calls != 4 || !errors.As(err, &re) || re.Reason != retry.ReasonExhausted || re.Attempts != 1 {
		t.Fatalf("calls = %d, err = %v", calls, err)
	}
	// A Retryable that accepts everything still does not retry an exhausted
	// error: only RetryExhausted does.
	calls = 0
	outer.Retryable = func(error) bool { return true }
	retry.Do(context.Background(), outer, func(ctx context.Context) error {
		return retry.Do(ctx, inner, func(context.Context) error { calls++; return errTransient })
	})
	if calls != 4 {
		t.Errorf("Retryable=true: %d calls, want 4", calls)
	}
}

// MaxAttempts 1 never waits, never reports a retry and reports 1 attempt.
func TestMaxAttemptsOneReportsOneAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		err := retry.Do(t.Context(), retry.Policy{MaxAttempts: 1, Observer: onRetry(func(retry.Event) { t.Error("EventRetry reported") })},
			func(context.Context) error { return errTransient })
		var re *retry.Error
		if !errors.As(err, &re) || re.Attempts != 1 || re.Reason != retry.ReasonAttempts || time.Since(start) != 0 {
			t.Fatalf("err = %v after %v", err, time.Since(start))
		}
	})
}

// One timer per Do, however many waits: allocations do not grow with the
// number of retries, and giving up adds only the *Error.
func TestOneTimerPerDo(t *testing.T) {
	ctx := context.Background()
	p := retry.Policy{Initial: time.Nanosecond, MaxDelay: time.Nanosecond, Jitter: retry.NoJitter(), MaxAttempts: retry.Unlimited}
	allocs := func(failures int) float64 {
		return testing.AllocsPerRun(50, func() {
			k := 0
			retry.Do(ctx, p, func(context.Context) error {
				if k++; k <= failures {
					return errTransient
				}
				return nil
			})
		})
	}
	one, many := allocs(1), allocs(20)
	if one == 0 || many != one {
		t.Errorf("allocs: %v with 1 wait, %v with 20 waits; want the same, non-zero (one timer)", one, many)
	}
	p = retry.Policy{Initial: retry.Immediate, MaxAttempts: 4}
	if n := testing.AllocsPerRun(100, func() {
		retry.Do(ctx, p, func(context.Context) error { return errTransient })
	}); n != 1 {
		t.Errorf("give-up with zero waits: %v allocs, want 1 (the *Error)", n)
	}
}

// timeoutErr is like net/http's timeout error: it matches
// context.DeadlineExceeded through an Is method, not by identity.
type timeoutErr struct{}

func (timeoutErr) Error() string        { return "timeout awaiting headers" }
func (timeoutErr) Is(target error) bool { return target == context.DeadlineExceeded }

// Context errors returned by op are not retried, however they are wrapped.
// A timeout that only matches context.DeadlineExceeded through its Is
// method (net's dial timeout, net/http's timeouts) ended an attempt, not a
// context: it is retried.
func TestContextErrorsFromOpInEveryShape(t *testing.T) {
	for _, err := range []error{
		context.Canceled,
		context.DeadlineExceeded,
		fmt.Errorf("dial: %w", context.Canceled),
		errors.Join(errTransient, context.DeadlineExceeded),
	} {
		n := 0
		got := retry.Do(context.Background(), retry.Policy{Initial: retry.Immediate}, func(context.Context) error { n++; return err })
		var re *retry.Error
		if n != 1 || !errors.As(got, &re) || re.Reason != retry.ReasonPermanent || !errors.Is(got, err) {
			t.Errorf("%v: %d calls, err %v; want 1 call, ReasonPermanent", err, n, got)
		}
	}
	for _, err := range []error{timeoutErr{}, fmt.Errorf("get: %w", timeoutErr{})} {
		n := 0
		retry.Do(context.Background(), retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}, func(context.Context) error { n++; return err })
		if n != 3 {
			t.Errorf("%v: %d calls, want 3 (a timeout matching context.DeadlineExceeded is retried)", err, n)
		}
	}
	_, dialErr := (&net.Dialer{Timeout: time.Nanosecond}).Dial("tcp", "127.0.0.1:1")
	n := 0
	retry.Do(context.Background(), retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}, func(context.Context) error { n++; return dialErr })
	if n != 3 {
		t.Errorf("dial timeout %v: %d calls, want 3", dialErr, n)
	}
	// An error that merely mentions a context is retried.
	n = 0
	retry.Do(context.Background(), retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}, func(context.Context) error {
		n++
		return errors.New("context canceled")
	})
	if n != 3 {
		t.Errorf("text-alike error: %d calls, want 3", n)
	}
}

// DoValue returns the last attempt's value on every path: the plain one and
// the one with a time budget and attempt timeout, at the first attempt and
// after retries.
func TestDoValueLastValueOnEveryPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, p := range []retry.Policy{
			{Jitter: retry.NoJitter(), MaxAttempts: 3},
			{Jitter: retry.NoJitter(), MaxAttempts: 3, MaxElapsed: time.Hour, AttemptTimeout: time.Minute},
		} {
			v, err := retry.DoValue(t.Context(), p, func(context.Context) (int, error) { return 7, retry.Permanent(errTransient) })
			if v != 7 || !errors.Is(err, errTransient) {
				t.Errorf("%+v permanent: %d, %v", p, v, err)
			}
			n := 0
			v, err = retry.DoValue(t.Context(), p, func(context.Context) (int, error) { n++; return n * 10, errTransient })
			var re *retry.Error
			if v != 30 || !errors.As(err, &re) || re.Attempts != 3 || re.Elapsed != 3*time.Second {
				t.Errorf("%+v: %d, %v", p, v, err)
			}
			n = 0
			v, err = retry.DoValue(t.Context(), p, func(context.Context) (int, error) {
				if n++; n < 2 {
					return -1, errTransient
				}
				return 42, nil
			})
			if v != 42 || err != nil {
				t.Errorf("%+v success: %d, %v", p, v, err)
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		v, err := retry.DoValue(ctx, retry.Policy{}, func(context.Context) (int, error) { return 1, nil })
		if v != 0 || !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled before start: %d, %v", v, err)
		}
	})
}

// An attempt's own timeout is retried even when Retryable rejects context
// errors; Permanent still stops it.
func TestAttemptTimeoutBypassesRetryable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := retry.Policy{AttemptTimeout: time.Second, Initial: retry.Immediate, MaxAttempts: 3,
			Retryable: func(err error) bool { return !errors.Is(err, context.DeadlineExceeded) }}
		n := 0
		err := retry.Do(t.Context(), p, func(ctx context.Context) error { n++; <-ctx.Done(); return ctx.Err() })
		var re *retry.Error
		if n != 3 || !errors.As(err, &re) || re.Reason != retry.ReasonAttempts {
			t.Fatalf("n = %d, err = %v", n, err)
		}
		n = 0
		retry.Do(t.Context(), p, func(ctx context.Context) error { n++; <-ctx.Done(); return retry.Permanent(ctx.Err()) })
		if n != 1 {
			t.Errorf("Permanent timeout: %d calls, want 1", n)
		}
		// The same error not caused by the attempt's timeout goes to Retryable.
		n = 0
		retry.Do(t.Context(), p, func(ctx context.Context) error { n++; return context.DeadlineExceeded })
		if n != 1 {
			t.Errorf("foreign DeadlineExceeded: %d calls, want 1", n)
		}
	})
}
