package retryotel_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryotel"
)

// Three calls: one won by its first copy before the delay, one won by its
// hedge, one whose hedge the Budget refuses.
func TestInstrumentHedges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp, r := newMeter(t)
		h, err := retry.NewHedger(retry.HedgeConfig{Delay: 10 * time.Millisecond, MaxCopies: 2})
		if err != nil {
			t.Fatal(err)
		}
		p := retryotel.Instrument(retry.Policy{}, "op", retryotel.WithMeterProvider(mp))
		slowFirst := func(first time.Duration) func(context.Context) error {
			return func(ctx context.Context) error {
				d := time.Millisecond
				if retry.HedgeAttempt(ctx) == 1 {
					d = first
				}
				select {
				case <-time.After(d):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		ctx := context.Background()
		retry.Hedge(ctx, p, h, slowFirst(time.Millisecond)) // no hedge
		retry.Hedge(ctx, p, h, slowFirst(time.Second))      // hedge sent and won
		b, _ := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: -1})
		pb := p
		pb.Budget = b
		retry.Hedge(ctx, pb, h, slowFirst(50*time.Millisecond)) // hedge refused
		c := collect(t, r)
		for _, m := range []struct {
			name string
			want int64
		}{{"retry.hedge.sent", 1}, {"retry.hedge.won", 1}, {"retry.hedge.refused", 1}} {
			if v, total := c.counter(m.name, opAttr); v != m.want || total != m.want {
				t.Errorf("%s = %d (total %d), want %d", m.name, v, total, m.want)
			}
		}
		if count, sum := c.hist("retry.call.attempts", opAttr); count != 3 || sum != 4 {
			t.Errorf("retry.call.attempts: %d calls, %v attempts; want 3 calls, 4 attempts", count, sum)
		}
	})
}
