package retrygax_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/googleapis/gax-go/v2"
	"github.com/retrykit/retry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// doneRecorder keeps the EventDone an Observer is told.
type doneRecorder struct {
	mu   sync.Mutex
	done *retry.Event
}

func (d *doneRecorder) Observe(_ context.Context, e retry.Event) {
	if e.Kind == retry.EventDone {
		d.mu.Lock()
		d.done = &e
		d.mu.Unlock()
	}
}

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
	var ref doneRecorder
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
	if calls != 1 || ref.done == nil || !errors.As(ref.done.Err, &refSt) || refSt.GRPCStatus().Code() != codes.Unavailable {
		t.Fatalf("reference: %d calls, EventDone %+v", calls, ref.done)
	}

	var got doneRecorder
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
	got.mu.Lock()
	defer got.mu.Unlock()
	if got.done == nil {
		t.Fatal("no EventDone")
	}
	t.Logf("retry.Do EventDone.Err: %v (reason %v, code %v)", ref.done.Err, ref.done.Reason, status.Code(ref.done.Err))
	t.Logf("retrygax EventDone.Err: %v (reason %v)", got.done.Err, got.done.Reason)
	if got.done.Reason != retry.ReasonAttempts || !errors.Is(got.done.Err, retry.ErrThrottled) {
		t.Fatalf("EventDone %+v: want ReasonAttempts and ErrThrottled", got.done)
	}
	var st interface{ GRPCStatus() *status.Status }
	if !errors.As(got.done.Err, &st) || st.GRPCStatus().Code() != codes.Unavailable {
		t.Errorf("EventDone.Err = %v: the failed attempt's UNAVAILABLE is lost (retry.Do's keeps it: %v)", got.done.Err, ref.done.Err)
	}
}
