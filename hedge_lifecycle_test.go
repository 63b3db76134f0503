package retry_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// A panic in a burst's first copy, which runs on the caller's goroutine,
// propagates only once the hedges in flight have returned (no copy
// outlives the call), and the first copy's own context is ended.
func TestHedgePanicInFirstCopyWaitsForHedges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			first    context.Context
			returned atomic.Bool // the hedge returned
		)
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Errorf("recovered %v, want boom", r)
				}
			}()
			retry.Hedge(t.Context(), retry.Policy{}, fixed(t, ms(10), 0), func(ctx context.Context) error {
				if retry.HedgeAttempt(ctx) == 1 {
					first = ctx
					time.Sleep(ms(15)) // the hedge is sent at 10ms
					panic("boom")
				}
				<-ctx.Done()
				time.Sleep(time.Second) // a copy slow to unwind
				returned.Store(true)
				return ctx.Err()
			})
			t.Error("Hedge returned")
		}()
		if !returned.Load() {
			t.Error("the panic reached the caller while a hedge was still running")
		}
		if first == nil || first.Err() == nil {
			t.Error("the first copy's context was not ended")
		}
		time.Sleep(2 * time.Second) // let a hedge left running end before the bubble does
	})
}

// MaxElapsed bounds the copies as it bounds Do's attempts: no copy is sent
// once the time budget is spent (with an AttemptTimeout it would have 1 ns
// and count as a timeout for the Throttle).
func TestHedgeMaxElapsedStopsHedges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{after: func(int) time.Duration { return ms(500) }, result: func(int) error { return errHedge }}
		p := retry.Policy{MaxElapsed: ms(100), Initial: retry.Immediate}
		err := retry.Hedge(t.Context(), p, fixed(t, ms(60), 0), s.op)
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonTimeBudget || re.Attempts != 2 {
			t.Errorf("Hedge = %v, want 2 attempts and ReasonTimeBudget", err)
		}
		if len(s.started) != 2 {
			t.Errorf("copies started at %v, want [0s 60ms]: none past MaxElapsed (100ms)", s.started)
		}
	})
}

// A server's pushback seen in a burst holds for the retry after it, even
// when a copy that failed later without one set the burst's last error.
func TestHedgePushbackHoldsForTheRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{
			after: func(n int) time.Duration { return map[int]time.Duration{1: ms(50), 2: ms(70), 3: ms(1)}[n] },
			result: func(n int) error {
				switch n {
				case 1:
					return retry.ServerWait(errHedge, time.Second)
				case 2:
					return errHedge
				}
				return nil
			},
		}
		p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}
		if err := retry.Hedge(t.Context(), p, fixed(t, ms(10), 2), s.op); err != nil {
			t.Fatal(err)
		}
		if len(s.started) != 3 || s.started[2] < ms(1050) {
			t.Errorf("copies started at %v, want the third one second or more after the pushback (at 50ms)", s.started)
		}
	})
}

// A loser counts toward the adaptive delay only with a time that says
// something: a hedge cancelled 1 ms after it was sent, because the first
// copy answered, is no sample of 1 ms. Every first copy answers in 10 or
// 11 ms: the median delay stays there, never falling toward the floor
// (which would hedge every call).
func TestHedgeAdaptiveIgnoresShortLosers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := retry.NewHedger(retry.HedgeConfig{Quantile: 0.5, WarmUp: 8, Samples: 8})
		if err != nil {
			t.Fatal(err)
		}
		call := func(first time.Duration) {
			retry.Hedge(t.Context(), retry.Policy{}, h, func(ctx context.Context) error {
				d := first
				if retry.HedgeAttempt(ctx) > 1 {
					d = time.Second
				}
				select {
				case <-time.After(d):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		}
		for range 8 {
			call(ms(10))
		}
		for i := range 8 {
			call(ms(11)) // a hedge at 10ms, which loses 1ms later
			if d, _ := h.Delay(); d < ms(10) {
				t.Fatalf("after call %d: Delay = %v, want 10ms or more", i+1, d)
			}
		}
	})
}

// A Samples too large to allocate is refused by NewHedger, not a panic
// (or an out-of-memory crash) at the first latency recorded.
func TestNewHedgerRejectsHugeSamples(t *testing.T) {
	for _, n := range []int{1<<20 + 1, 1 << 40, int(^uint(0) >> 1)} {
		if h, err := retry.NewHedger(retry.HedgeConfig{Samples: n}); err == nil || h != nil {
			t.Errorf("NewHedger(Samples: %d) = %v, %v; want an error", n, h, err)
		}
	}
	if _, err := retry.NewHedger(retry.HedgeConfig{Samples: 1 << 20}); err != nil {
		t.Errorf("NewHedger(Samples: 1<<20) = %v, want it accepted", err)
	}
}

// The winner's context ends once HedgeValue returns, as HedgeValue's doc
// says: a value that reads through it afterwards cannot.
func TestHedgeValueWinnersContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, err := retry.HedgeValue(t.Context(), retry.Policy{}, fixed(t, ms(10), 0), func(ctx context.Context) (context.Context, error) {
			return ctx, nil
		})
		if err != nil || ctx.Err() == nil || retry.HedgeAttempt(ctx) != 1 {
			t.Errorf("winner's context: %v, attempt %d (call error %v); want it ended", ctx.Err(), retry.HedgeAttempt(ctx), err)
		}
	})
}

// Event sequences stay consistent over many seeded hedged calls mixing
// slow and fast copies, retryable, fatal and pushback failures, a Budget
// and a Throttle: every EventHedge is followed by its copy's EventAttempt,
// every copy sent has one EventAttempt, EventHedgeWon and
// EventHedgeCancelled name copies sent, and EventDone's Attempt equals the
// copies sent plus the first copies the Throttle rejected.
func TestHedgeEventSequencesConsistent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := retry.NewBudget(retry.BudgetConfig{Ratio: 0.5})
		th, _ := retry.NewThrottle(retry.ThrottleConfig{})
		errFatal := errors.New("test: fatal")
		for seed := range 200 {
			var r retrytest.Recorder
			var sent atomic.Int32
			p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 1 + seed%6, Observer: &r,
				Retryable: func(err error) bool { return !errors.Is(err, errFatal) }}
			if seed%3 == 0 {
				p.Budget, p.Throttle = b, th
			}
			retry.Hedge(t.Context(), p, fixed(t, ms(10), 1+seed%4), func(ctx context.Context) error {
				sent.Add(1)
				n := retry.HedgeAttempt(ctx)
				x := (seed*7 + n*13) % 10
				select {
				case <-time.After(ms(3 * x)):
				case <-ctx.Done():
					return ctx.Err()
				}
				switch x {
				case 0, 1, 2:
					return errHedge
				case 3:
					return retry.ServerWait(errHedge, ms(5))
				case 4:
					if seed%5 == 0 {
						return errFatal
					}
				}
				return nil
			})
			attempts, throttled := map[int]int{}, 0
			var done *retry.Event
			events := r.Events()
			for i, e := range events {
				switch e.Kind {
				case retry.EventAttempt:
					attempts[e.Attempt]++
				case retry.EventThrottled:
					throttled++
				case retry.EventHedge:
					if i+1 >= len(events) || events[i+1].Kind != retry.EventAttempt || events[i+1].Attempt != e.Attempt {
						t.Fatalf("seed %d: EventHedge %d not followed by its EventAttempt: %v", seed, e.Attempt, r.Kinds())
					}
				case retry.EventHedgeWon, retry.EventHedgeCancelled:
					if attempts[e.Attempt] != 1 {
						t.Fatalf("seed %d: %v for attempt %d, never sent: %v", seed, e.Kind, e.Attempt, r.Kinds())
					}
				case retry.EventDone:
					done = &events[i]
				}
			}
			for n, k := range attempts {
				if k != 1 {
					t.Fatalf("seed %d: attempt %d reported %d times", seed, n, k)
				}
			}
			if done == nil || done != &events[len(events)-1] {
				t.Fatalf("seed %d: EventDone missing or not last: %v", seed, r.Kinds())
			}
			if int(sent.Load()) != len(attempts) || done.Attempt != len(attempts)+throttled || done.Attempt > p.MaxAttempts {
				t.Fatalf("seed %d: %d copies ran, %d EventAttempt, %d throttled, EventDone says %d (MaxAttempts %d)",
					seed, sent.Load(), len(attempts), throttled, done.Attempt, p.MaxAttempts)
			}
		}
	})
}

type callerKey struct{}

// A copy's context stays its own call's after the call returned, however
// many calls have reused the Hedger since: an operation that kept its
// context (a goroutine it started, a value it returned) still reads its
// own call's values, attempt number and cancellation.
func TestHedgeRetainedContextKeepsItsCall(t *testing.T) {
	h := fixed(t, time.Hour, 0)
	var kept []context.Context
	for i := range 50 {
		ctx := context.WithValue(t.Context(), callerKey{}, i)
		err := retry.Hedge(ctx, retry.Policy{}, h, func(cctx context.Context) error {
			kept = append(kept, cctx)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, cctx := range kept {
		if v := cctx.Value(callerKey{}); v != i {
			t.Errorf("call %d: its copy's context reads the caller's value %v", i, v)
		}
		if n := retry.HedgeAttempt(cctx); n != 1 {
			t.Errorf("call %d: attempt %d, want 1", i, n)
		}
		if cctx.Err() == nil {
			t.Errorf("call %d: its copy's context is alive after the call returned", i)
		}
	}
}

// Calls whose context has ended before they start give up without the
// Hedger's pool: two goroutines taking turns on one P (so that a state
// one gives back is the next one's) ran into a race under -race when the
// call read its start time after giving its state back.
func TestHedgeEndedContextTouchesNoPooledState(t *testing.T) {
	h := fixed(t, time.Hour, 0)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	p := retry.Policy{MaxElapsed: time.Hour}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for range 100 {
				err := retry.Hedge(ctx, p, h, func(context.Context) error { return nil })
				if !errors.Is(err, context.Canceled) {
					t.Errorf("got %v, want an error matching context.Canceled", err)
				}
				runtime.Gosched()
			}
		})
	}
	wg.Wait()
}

type callID struct{}

// slowObserver holds up every third event for 20 to 120 µs. A hedged
// call reports its events under its lock, so copies and timer callbacks
// queue on it, and unlock it on the slow path that wakes a waiter.
type slowObserver struct{ n atomic.Int64 }

func (o *slowObserver) Observe(context.Context, retry.Event) {
	if k := o.n.Add(1); k%3 == 0 {
		time.Sleep(time.Duration(1+k%6) * 20 * time.Microsecond)
	}
}

// Many calls share one Hedger, and so its pool of call states, with
// hedges, failures, retries and two value types: every copy runs with
// its own call's context and a fresh attempt number, each call returns
// its own value with no copy left in flight, and -race sees no state
// touched after it was given back (resetting the call's mutex with the
// rest raced with the last Unlock, in about one run in three on one core:
// taskset -c 0 and -cpu 4).
func TestHedgePooledStateConcurrentCalls(t *testing.T) {
	h, err := retry.NewHedger(retry.HedgeConfig{FixedDelay: 30 * time.Microsecond, MaxCopies: 3})
	if err != nil {
		t.Fatal(err)
	}
	var ids atomic.Int64
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 26))
			for range 200 {
				id := ids.Add(1)
				ctx := context.WithValue(t.Context(), callID{}, id)
				p := retry.Policy{MaxAttempts: 6, Initial: retry.Immediate, Observer: &slowObserver{}}
				var (
					mu       sync.Mutex
					seen     = map[int]bool{}
					inFlight int
				)
				lat, fail := make([]time.Duration, 7), make([]bool, 7)
				for i := range lat {
					lat[i] = time.Duration(r.IntN(120)) * time.Microsecond
					fail[i] = r.IntN(3) == 0
				}
				op := func(cctx context.Context) (int64, error) {
					n := retry.HedgeAttempt(cctx)
					mu.Lock()
					if got := cctx.Value(callID{}); got != id {
						t.Errorf("call %d: a copy runs with call %v's context", id, got)
					}
					if seen[n] || n < 1 || n > 6 {
						t.Errorf("call %d: attempt %d again or out of range", id, n)
					}
					seen[n] = true
					if inFlight++; inFlight > 3 {
						t.Errorf("call %d: %d copies in flight, want at most 3", id, inFlight)
					}
					mu.Unlock()
					defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
					select {
					case <-time.After(lat[n]):
					case <-cctx.Done():
						return -id, cctx.Err()
					}
					if fail[n] {
						return -id, errHedge
					}
					return id, nil
				}
				var (
					v   int64
					err error
				)
				if g%2 == 0 {
					v, err = retry.HedgeValue(ctx, p, h, op)
				} else {
					var s string
					s, err = retry.HedgeValue(ctx, p, h, func(cctx context.Context) (string, error) {
						v, err := op(cctx)
						return strconv.FormatInt(v, 10), err
					})
					v, _ = strconv.ParseInt(s, 10, 64)
				}
				if err == nil && v != id {
					t.Errorf("call %d returned call %d's value", id, v)
				}
				mu.Lock()
				if inFlight != 0 {
					t.Errorf("call %d returned with %d copies in flight", id, inFlight)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}
