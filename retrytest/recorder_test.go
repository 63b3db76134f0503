package retrytest_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

var errDown = errors.New("down")

// failing returns an operation that fails n times, then succeeds.
func failing(n int) func(context.Context) error {
	var mu sync.Mutex
	return func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if n > 0 {
			n--
			return errDown
		}
		return nil
	}
}

// TestRecorderCalls: sequential unnamed calls are split at EventDone;
// concurrent named calls keep their own events.
func TestRecorderCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec retrytest.Recorder
		p := retry.Policy{Initial: time.Second, Jitter: retry.NoJitter(), MaxAttempts: 3, Observer: &rec}
		ctx := t.Context()
		retry.Do(ctx, p, failing(1))
		retry.Do(ctx, p, failing(5))
		calls := rec.Calls()
		if len(calls) != 2 {
			t.Fatalf("%d calls; want 2: %s", len(calls), &rec)
		}
		if got, want := calls[0].String(), "attempt 1, retry 1 wait 1s, attempt 2, done 2 ok"; got != want {
			t.Fatalf("first call %q; want %q", got, want)
		}
		last := rec.Last()
		if last.Attempts() != 3 || !slices.Equal(last.Waits(), []time.Duration{time.Second, 2 * time.Second}) ||
			last.Reason() != retry.ReasonAttempts || last.Hedges() != 0 {
			t.Fatalf("last call %s", last)
		}
		if rec.Attempts() != 5 || len(rec.Waits()) != 3 || rec.Reason() != retry.ReasonAttempts || rec.Count(retry.EventDone) != 2 {
			t.Fatalf("whole record %s", &rec)
		}
		if d, ok := rec.Done(); !ok || !errors.Is(d.Err, errDown) || d.Attempt != 3 {
			t.Fatalf("Done = %+v, %v", d, ok)
		}
		if r, ok := rec.First(retry.EventRetry); !ok || r.Attempt != 1 || r.Delay != time.Second {
			t.Fatalf("First(EventRetry) = %+v, %v", r, ok)
		}
		if rs := rec.Of(retry.EventRetry); len(rs) != 3 || rs[2].Attempt != 2 || rs[2].Delay != 2*time.Second {
			t.Fatalf("Of(EventRetry) = %+v; want the 3 retries", rs)
		}
		if _, ok := rec.Last().First(retry.EventHedge); ok {
			t.Fatal("First(EventHedge) found one in a call without hedges")
		}

		rec.Reset()
		var wg sync.WaitGroup
		for i, name := range []string{"a", "b", "c"} {
			wg.Go(func() { retry.Do(retrytest.WithCall(ctx, name), p, failing(i)) })
		}
		wg.Wait()
		for i, name := range []string{"a", "b", "c"} {
			c := rec.Call(name)
			if c.Attempts() != i+1 || c.Reason() != 0 || len(c.Kinds()) != 2*i+2 {
				t.Fatalf("call %s: %s; want %d attempts and success", name, c, i+1)
			}
		}
		if c := rec.Call("none"); c.Events != nil || c.Attempts() != 0 {
			t.Fatalf("unknown call: %+v", c)
		}
	})
}

// TestRecorderHedges: hedges are counted.
func TestRecorderHedges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec retrytest.Recorder
		p := retry.Policy{MaxAttempts: 3, Observer: &rec}
		h, err := retry.NewHedger(retry.HedgeConfig{FixedDelay: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		var n int
		var mu sync.Mutex
		err = retry.Hedge(t.Context(), p, h, func(ctx context.Context) error {
			mu.Lock()
			n++
			first := n == 1
			mu.Unlock()
			if first {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
		if err != nil || rec.Hedges() != 1 || rec.Attempts() != 2 || rec.Count(retry.EventHedgeWon) != 1 {
			t.Fatalf("%v; recorded %s", err, &rec)
		}
	})
}

// TestSeedSchedule: under Seed, a call's waits are exactly Schedule's, the
// same for every call; another seed gives other waits.
func TestSeedSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec retrytest.Recorder
		p := retry.Policy{Observer: &rec}
		want, err := retrytest.Schedule(p, 7)
		if err != nil || len(want) != 9 {
			t.Fatalf("Schedule of the zero Policy: %d waits, %v; want 9", len(want), err)
		}
		ctx := retrytest.Seed(t.Context(), 7)
		for range 2 {
			retry.Do(ctx, p, failing(100))
			if got := rec.Last().Waits(); !slices.Equal(got, want) {
				t.Fatalf("waits %v; want %v", got, want)
			}
		}
		if other, _ := retrytest.Schedule(p, 8); slices.Equal(other, want) {
			t.Fatalf("seeds 7 and 8 give the same schedule %v", want)
		}
		for i, d := range want {
			if lo, hi := p.Bounds(i); d < lo || d > hi {
				t.Fatalf("wait %d = %v outside [%v, %v]", i, d, lo, hi)
			}
		}
		for _, q := range []retry.Policy{{MaxAttempts: retry.Unlimited}, {Initial: retry.Immediate, MaxAttempts: 3}, {Multiplier: 0.5}} {
			s, err := retrytest.Schedule(q, 1)
			switch {
			case q.MaxAttempts == retry.Unlimited && len(s) != 100,
				q.Initial == retry.Immediate && !slices.Equal(s, []time.Duration{0, 0}),
				q.Multiplier == 0.5 && (s != nil || !errors.Is(err, retry.ErrInvalidPolicy)):
				t.Fatalf("Schedule(%+v) = %v, %v", q, s, err)
			}
		}
	})
}

// TestNoWaits: no computed waits, a server's wait still honoured, the
// other fields kept.
func TestNoWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec retrytest.Recorder
		p := retrytest.NoWaits(retry.Policy{MaxAttempts: 3, Observer: &rec})
		start := time.Now()
		n := 0
		err := retry.Do(t.Context(), p, func(context.Context) error {
			n++
			if n == 1 {
				return retry.ServerWait(errDown, 5*time.Second)
			}
			return errDown
		})
		if !errors.Is(err, errDown) || rec.Attempts() != 3 || !slices.Equal(rec.Waits(), []time.Duration{5 * time.Second, 0}) {
			t.Fatalf("%v; recorded %s", err, &rec)
		}
		if time.Since(start) != 5*time.Second {
			t.Fatalf("took %v; want the server's 5s only", time.Since(start))
		}
	})
}
