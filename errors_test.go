package retry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

func TestErrorText(t *testing.T) {
	e := &retry.Error{Attempts: 3, Elapsed: 7200 * time.Millisecond, Reason: retry.ReasonAttempts, Err: errTransient}
	if got, want := e.Error(), "retry: gave up after 3 attempts in 7.2s (attempts used up): transient"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	e = &retry.Error{Attempts: 1, Reason: retry.ReasonBudget, Err: errTransient}
	if !errors.Is(e, retry.ErrBudgetRefused) || !strings.Contains(e.Error(), "1 attempt in") {
		t.Errorf("budget error: %v", e)
	}
}

func TestErrorWrapsAndMatches(t *testing.T) {
	type codeErr struct{ error }
	last := codeErr{errors.New("503")}
	e := &retry.Error{Attempts: 2, Reason: retry.ReasonContext, Err: last, Cause: context.Canceled}
	var ce codeErr
	if !errors.As(e, &ce) || !errors.Is(e, context.Canceled) || errors.Is(e, context.DeadlineExceeded) {
		t.Errorf("errors.As/Is do not see through %v", e)
	}
	if errors.Is(e, retry.ErrBudgetRefused) {
		t.Error("context error matched ErrBudgetRefused")
	}
	if got := e.Unwrap(); got != error(last) {
		t.Errorf("Unwrap = %v", got)
	}
	if !e.Exhausted() || !retry.IsExhausted(fmt.Errorf("outer: %w", e)) {
		t.Error("*Error is not exhausted")
	}
	// Cancelled before the first attempt: no last error, the text names the cause.
	e = &retry.Error{Reason: retry.ReasonContext, Cause: context.Canceled}
	if got, want := e.Error(), "retry: gave up after 0 attempts in 0s (context done): context canceled"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

type exhaustedErr struct{ done bool }

func (e exhaustedErr) Error() string   { return "transport gave up" }
func (e exhaustedErr) Exhausted() bool { return e.done }

func TestIsExhausted(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errTransient, false},
		{exhaustedErr{true}, true},
		{exhaustedErr{false}, false},
		{fmt.Errorf("a: %w", exhaustedErr{true}), true},
		{errors.Join(errTransient, fmt.Errorf("b: %w", &retry.Error{})), true},
	} {
		if got := retry.IsExhausted(tc.err); got != tc.want {
			t.Errorf("IsExhausted(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestPermanentAndAfterMarks(t *testing.T) {
	base := errors.New("base")
	p := retry.Permanent(fmt.Errorf("ctx: %w", base))
	if !retry.IsPermanent(p) || !retry.IsPermanent(fmt.Errorf("w: %w", p)) || !errors.Is(p, base) || p.Error() != "ctx: base" {
		t.Errorf("Permanent mark: %v", p)
	}
	if retry.IsPermanent(base) || retry.IsPermanent(nil) {
		t.Error("IsPermanent of an unmarked error")
	}
	a := retry.ServerWait(base, 3*time.Second)
	if d, ok := retry.ServerWaitOf(fmt.Errorf("w: %w", a)); !ok || d != 3*time.Second || !errors.Is(a, base) || a.Error() != "base" {
		t.Errorf("ServerWaitOf = %v, %v", d, ok)
	}
	if d, ok := retry.ServerWaitOf(retry.ServerWait(base, -time.Second)); !ok || d != 0 {
		t.Errorf("negative After: %v, %v, want 0, true", d, ok)
	}
	if _, ok := retry.ServerWaitOf(base); ok {
		t.Error("RetryAfter of an unmarked error")
	}
	// Both marks together: Permanent wins in the loop.
	n := 0
	err := retry.Do(context.Background(), retry.Policy{}, func(context.Context) error {
		n++
		return retry.Permanent(retry.ServerWait(base, time.Hour))
	})
	if n != 1 || !errors.Is(err, base) {
		t.Errorf("n = %d, err = %v", n, err)
	}
}

func TestReasonString(t *testing.T) {
	seen := map[string]bool{}
	for r := retry.ReasonAttempts; r <= retry.ReasonBudget; r++ {
		s := r.String()
		if s == "" || strings.HasPrefix(s, "Reason(") || seen[s] {
			t.Errorf("Reason %d: %q", r, s)
		}
		seen[s] = true
	}
	if s := retry.Reason(0).String(); s != "Reason(0)" {
		t.Errorf("Reason(0) = %q", s)
	}
	if s := retry.Reason(200).String(); s != "Reason(200)" {
		t.Errorf("Reason(200) = %q", s)
	}
}
