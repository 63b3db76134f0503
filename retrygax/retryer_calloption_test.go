package retrygax_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/redis/apiv1/redispb"
	"github.com/googleapis/gax-go/v2"
	"github.com/googleapis/gax-go/v2/apierror"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/internal/fleetseam"
	"github.com/retrykit/retry/retrygax"
	"github.com/retrykit/retry/retrytest"
	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// events returns the events r recorded as "kind/attempt", a successful
// EventDone as "done/n(ok)".
func events(r *retrytest.Recorder) []string {
	var out []string
	for _, e := range r.Events() {
		s := fmt.Sprintf("%s/%d", e.Kind, e.Attempt)
		if e.Kind == retry.EventDone && e.Err == nil {
			s += "(ok)"
		}
		out = append(out, s)
	}
	return out
}

// A per-call WithPolicy over the client's default WithPolicy governs the
// call alone: each attempt reaches the shared Throttle once, the shared
// Budget counts the first attempt once, and the Observer sees one call.
func TestPerCallPolicySupersedesDefault(t *testing.T) {
	th, err := retry.NewThrottle(retry.ThrottleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		account.Record(th, true) // a healthy backend so far: no retry is throttled
	}
	b, err := retry.NewBudget(retry.BudgetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var log retrytest.Recorder
	def := fast
	def.Throttle, def.Budget, def.Observer = th, b, &log
	perCall := def
	perCall.MaxAttempts = 2
	f := &fakeRedis{script: failing(1, status.Error(codes.Unavailable, "down"))}
	c := grpcClient(t, f)
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(def)}
	if _, err := c.GetInstance(t.Context(), &redispb.GetInstanceRequest{Name: instanceName}, mustPolicy(perCall)); err != nil {
		t.Fatal(err)
	}
	if got, want := events(&log), []string{"attempt/1", "retry/1", "attempt/2", "done/2(ok)"}; !slices.Equal(got, want) {
		t.Errorf("Observer saw %v, want %v", got, want)
	}
	if req, acc := fleetseam.ThrottleOf[*retry.Throttle]().LocalCounts(th); req != 102 || acc != 101 {
		t.Errorf("Throttle counted %d requests, %d accepts; want 102, 101 (each attempt once)", req, acc)
	}
	if first, retries := fleetseam.BudgetOf[*retry.Budget]().LocalCounts(b); first != 1 || retries != 1 {
		t.Errorf("Budget counted %d first attempts, %d retries; want 1, 1", first, retries)
	}

	// With an Observer of its own, the default's is told the first attempt
	// (resolved before gax knows which option wins) and nothing more.
	var defLog, callLog retrytest.Recorder
	def.Observer, perCall.Observer = &defLog, &callLog
	f.calls.Store(0)
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(def)}
	if _, err := c.GetInstance(t.Context(), &redispb.GetInstanceRequest{Name: instanceName}, mustPolicy(perCall)); err != nil {
		t.Fatal(err)
	}
	if got, want := events(&defLog), []string{"attempt/1"}; !slices.Equal(got, want) {
		t.Errorf("superseded Observer saw %v, want %v", got, want)
	}
	if got, want := events(&callLog), []string{"attempt/1", "retry/1", "attempt/2", "done/2(ok)"}; !slices.Equal(got, want) {
		t.Errorf("per-call Observer saw %v, want %v", got, want)
	}
	// An invalid per-call policy cannot supersede anything: WithPolicy
	// refuses it where the option is made.
	if o, err := retrygax.WithPolicy(retry.Policy{MaxAttempts: -4}); err == nil || o != nil {
		t.Errorf("WithPolicy of an invalid policy = %v, %v; want an error", o, err)
	}
}

// The context ends during gax's wait: gax returns without asking the
// Retryer again, so no EventDone follows (as WithPolicy documents).
func TestContextEndsDuringGaxWait(t *testing.T) {
	var log retrytest.Recorder
	p := fast
	p.Initial, p.MaxDelay = 10*time.Second, 10*time.Second
	p.Observer = &log
	f := &fakeRedis{script: failing(100, status.Error(codes.Unavailable, "down"))}
	c := grpcClient(t, f)
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p)}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := getInstance(ctx, c); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}
	if got, want := events(&log), []string{"attempt/1", "retry/1", "attempt/2"}; !slices.Equal(got, want) || f.calls.Load() != 1 {
		t.Fatalf("%d calls, events %v; want 1, %v", f.calls.Load(), got, want)
	}
}

// A Retryer from WithPolicy, used directly, takes any error without
// panicking; only retried statuses are retried.
func TestRetryerOddErrors(t *testing.T) {
	for _, tc := range []struct {
		err   error
		retry bool
	}{
		{nil, false},
		{errors.New("plain"), false},
		{context.DeadlineExceeded, false},
		{status.Error(codes.OK, ""), false},
		{&googleapi.Error{}, false},
		{&apierror.APIError{}, false},
		{&googleapi.Error{Code: 503}, true},
		{fmt.Errorf("wrapped: %w", status.Error(codes.Unavailable, "x")), true},
		{func() error { ae, _ := apierror.FromError(status.Error(codes.Unavailable, "x")); return ae }(), true},
	} {
		var s gax.CallSettings
		mustPolicy(fast).Resolve(&s)
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("Retry(%T) panicked: %v", tc.err, v)
				}
			}()
			if _, ok := s.Retry().Retry(tc.err); ok != tc.retry {
				t.Errorf("Retry(%T %v) = %v, want %v", tc.err, tc.err, ok, tc.retry)
			}
		}()
	}
}

// One WithPolicy serves concurrent calls, with every accounting hook set
// (run with -race): one EventDone per call.
func TestConcurrentCallsShareOption(t *testing.T) {
	th, _ := retry.NewThrottle(retry.ThrottleConfig{})
	b, _ := retry.NewBudget(retry.BudgetConfig{})
	var log retrytest.Recorder
	p := fast
	p.Throttle, p.Budget, p.Observer, p.Jitter, p.MaxElapsed = th, b, &log, retry.FullJitter(), time.Second
	f := &fakeRedis{script: func(n int) error {
		if n%3 != 0 {
			return status.Error(codes.Unavailable, "down")
		}
		return nil
	}}
	c := grpcClient(t, f)
	c.CallOptions.GetInstance = []gax.CallOption{mustPolicy(p)}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 5 {
				getInstance(t.Context(), c)
			}
		})
	}
	wg.Wait()
	var done int
	for _, e := range events(&log) {
		if e[:4] == "done" {
			done++
		}
	}
	if done != 80 {
		t.Errorf("%d EventDone for 80 calls", done)
	}
}
