package retryotel_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryotel"
	"github.com/retrykit/retry/retrytest"
)

// Over many seeded hedged calls (hedges won, lost, refused by a Budget,
// copies failing), the hedge counters and the attempts histogram equal
// what the Observer was told.
func TestInstrumentHedgesMatchEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp, r := newMeter(t)
		var rec retrytest.Recorder
		b, _ := retry.NewBudget(retry.BudgetConfig{Ratio: 0.2, MinPerSecond: -1})
		p := retryotel.Instrument(retry.Policy{Observer: &rec, Budget: b, Initial: retry.Immediate, MaxAttempts: 4}, "op", retryotel.WithMeterProvider(mp))
		h, err := retry.NewHedger(retry.HedgeConfig{FixedDelay: 10 * time.Millisecond, MaxCopies: 3})
		if err != nil {
			t.Fatal(err)
		}
		errFail := errors.New("test: transient")
		const calls = 100
		for i := range calls {
			retry.Hedge(context.Background(), p, h, func(ctx context.Context) error {
				x := (i*7 + retry.HedgeAttempt(ctx)*5) % 10
				select {
				case <-time.After(time.Duration(3*x) * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
				if x < 3 {
					return errFail
				}
				return nil
			})
		}
		c := collect(t, r)
		seen := func(k retry.EventKind) int64 { return int64(rec.Count(k)) }
		var sum int64
		for _, e := range rec.Of(retry.EventDone) {
			sum += int64(e.Attempt)
		}
		for _, m := range []struct {
			name string
			kind retry.EventKind
		}{{"retry.hedge.sent", retry.EventHedge}, {"retry.hedge.won", retry.EventHedgeWon}, {"retry.hedge.refused", retry.EventHedgeRefused}} {
			if v, _ := c.counter(m.name, opAttr); v != seen(m.kind) || v == 0 {
				t.Errorf("%s = %d, the Observer saw %d %v events (want equal, not zero)", m.name, v, seen(m.kind), m.kind)
			}
		}
		if count, s := c.hist("retry.call.attempts", opAttr); count != calls || int64(s) != sum || sum != seen(retry.EventAttempt) {
			t.Errorf("retry.call.attempts: %d calls, %v attempts; the Observer saw %d EventDone attempts, %d EventAttempt", count, s, sum, seen(retry.EventAttempt))
		}
	})
}
