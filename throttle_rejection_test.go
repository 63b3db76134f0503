package retry_test

// What a Throttle counts as a rejection, and what a loop that gives up on
// rejected attempts returns.

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
)

// TestThrottledEndKeepsLastError: a loop that gives up on attempts the
// Throttle rejected after one that was made keeps that attempt's error
// beside ErrThrottled (what the backend answered is not lost); a loop
// whose every attempt was rejected has ErrThrottled alone.
func TestThrottledEndKeepsLastError(t *testing.T) {
	boom := &statusError{code: 503}
	for _, tc := range []struct {
		name        string
		rejectFirst bool
		calls       int
		wantBackend bool
	}{
		{"rejected after an attempt", false, 1, true},
		{"every attempt rejected", true, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th, err := retry.NewThrottle(retry.ThrottleConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.rejectFirst {
				th.Override(retry.ThrottleRejectAll)
			}
			calls := 0
			err = retry.Do(context.Background(), retry.Policy{Initial: retry.Immediate, MaxAttempts: 3, Throttle: th}, func(context.Context) error {
				calls++
				th.Override(retry.ThrottleRejectAll) // reject every attempt from now on
				return boom
			})
			var re *retry.Error
			if !errors.As(err, &re) || re.Attempts != 3 || re.Reason != retry.ReasonAttempts || calls != tc.calls {
				t.Fatalf("err %v after %d calls, want a *retry.Error of 3 attempts used up after %d", err, calls, tc.calls)
			}
			if !errors.Is(err, retry.ErrThrottled) {
				t.Errorf("%v does not match ErrThrottled", err)
			}
			var se *statusError
			if got := errors.As(err, &se); got != tc.wantBackend || got && se != boom {
				t.Errorf("errors.As(%v, *statusError) = %v, want %v", err, got, tc.wantBackend)
			}
			if !tc.wantBackend && re.Err != retry.ErrThrottled {
				t.Errorf("Err = %v, want ErrThrottled itself", re.Err)
			}
		})
	}
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "backend answered " + strconv.Itoa(e.code) }

// README: "Errors that report Overloaded() (retryhttp's 429 and 503) and
// attempt timeouts count as rejections; other errors count as accepted".
// An attempt that ran out of its AttemptTimeout counted as accepted unless
// its error wrapped context.DeadlineExceeded itself: an operation that
// reports the timeout in its own error type (a gRPC status
// DEADLINE_EXCEEDED from a raw client call, an error string) or ignores
// its context kept a Throttle from ever throttling a backend that times
// out, although the loop itself knew the attempt had timed out (it
// retried it whatever Retryable said).
func TestAttemptTimeoutCountsAsThrottleRejection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, _ := retry.NewThrottle(retry.ThrottleConfig{})
		th.Override(retry.ThrottleAllowAll) // let all 3 through; outcomes are still counted
		p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3, AttemptTimeout: time.Second, Throttle: th}
		errTimeout := errors.New("rpc error: code = DeadlineExceeded desc = context deadline exceeded")
		retry.Do(t.Context(), p, func(ctx context.Context) error {
			<-ctx.Done()
			return errTimeout // the timeout, in the client's own error type
		})
		if requests, accepts := th.LocalCounts(); requests != 3 || accepts != 0 {
			t.Fatalf("3 timed-out attempts: Throttle counted %d requests, %d accepted; want 3, 0", requests, accepts)
		}
	})
}
