package loop

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// TestPolicy: a dial timeout matches context.DeadlineExceeded, which
// retry.Do alone takes for the end of a context and does not retry;
// through Policy it is retried, as the caller's Retryable allows.
func TestPolicy(t *testing.T) {
	_, dialErr := (&net.Dialer{Timeout: time.Nanosecond}).Dial("tcp", "127.0.0.1:1")
	if !errors.Is(dialErr, context.DeadlineExceeded) {
		t.Skipf("this platform's dial timeout (%v) does not match context.DeadlineExceeded", dialErr)
	}
	attempts := func(p retry.Policy) int {
		n := 0
		retry.Do(context.Background(), p, func(context.Context) error { n++; return dialErr })
		return n
	}
	p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}
	if n := attempts(p); n != 1 {
		t.Fatalf("plain policy: %d attempts; want 1 (why Policy exists)", n)
	}
	if n := attempts(Policy(p)); n != 3 {
		t.Fatalf("Policy: %d attempts; want 3", n)
	}
	p.Retryable = func(error) bool { return false }
	if n := attempts(Policy(p)); n != 1 {
		t.Fatalf("Policy with a Retryable that refuses: %d attempts; want 1", n)
	}
}
