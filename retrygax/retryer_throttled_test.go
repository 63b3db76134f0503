package retrygax_test

import (
	"context"
	"errors"
	"testing"

	"github.com/googleapis/gax-go/v2"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rejectingThrottle returns a Throttle that rejects (almost) every request.
func rejectingThrottle(t *testing.T) *retry.Throttle {
	t.Helper()
	th, err := retry.NewThrottle(retry.ThrottleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	th.Override(retry.ThrottleRejectAll)
	return th
}

// WithPolicy promises the Observer "EventDone (with the *retry.Error it
// would have returned) as retry.Do tells them". When the Throttle rejects
// the retries left after a failed attempt, retry.Do's *retry.Error wraps
// both ErrThrottled and the failed attempt's error (what the backend
// answered); WithPolicy's must too.
func TestThrottledDoneKeepsLastAttemptError(t *testing.T) {
	backendErr := status.Error(codes.Unavailable, "down")

	// retry.Do, the reference: the Throttle lets the first attempt
	// through (retry.Do asks it before every attempt) and then rejects.
	var ref retrytest.Recorder
	refTh, err := retry.NewThrottle(retry.ThrottleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p := fast
	p.MaxAttempts = 3
	p.Throttle, p.Observer = refTh, &ref
	calls := 0
	retry.Do(t.Context(), p, func(context.Context) error {
		calls++
		refTh.Override(retry.ThrottleRejectAll)
		return backendErr
	})
	var refSt interface{ GRPCStatus() *status.Status }
	refDone, refOK := ref.Done()
	if calls != 1 || !refOK || !errors.As(refDone.Err, &refSt) || refSt.GRPCStatus().Code() != codes.Unavailable {
		t.Fatalf("reference: %d calls, EventDone %+v", calls, refDone)
	}

	var got retrytest.Recorder
	p.Throttle, p.Observer = rejectingThrottle(t), &got
	f := &fakeRedis{script: failing(100, backendErr)}
	c := grpcClient(t, f)
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p)}
	if _, err := getInstance(t.Context(), c); status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v", err)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("server saw %d calls, want 1", n)
	}
	gotDone, ok := got.Done()
	if !ok {
		t.Fatal("no EventDone")
	}
	t.Logf("retry.Do EventDone.Err: %v (reason %v, code %v)", refDone.Err, refDone.Reason, status.Code(refDone.Err))
	t.Logf("retrygax EventDone.Err: %v (reason %v)", gotDone.Err, gotDone.Reason)
	if gotDone.Reason != retry.ReasonAttempts || !errors.Is(gotDone.Err, retry.ErrThrottled) {
		t.Fatalf("EventDone %+v: want ReasonAttempts and ErrThrottled", gotDone)
	}
	var st interface{ GRPCStatus() *status.Status }
	if !errors.As(gotDone.Err, &st) || st.GRPCStatus().Code() != codes.Unavailable {
		t.Errorf("EventDone.Err = %v: the failed attempt's UNAVAILABLE is lost (retry.Do's keeps it: %v)", gotDone.Err, refDone.Err)
	}
}
