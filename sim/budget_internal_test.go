package sim

import (
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
)

// The virtual-time budget grants exactly what retry.Budget grants for the
// same sequence of first attempts and retry requests, retry.Budget running
// on synctest's clock. Each step reads the clock (a retry request) before
// recording first attempts, so that retry.Budget dates them exactly.
func TestBudgetModelMatchesRetryBudget(t *testing.T) {
	for _, c := range []retry.BudgetConfig{
		{},
		{Ratio: 0.5, MinPerSecond: -1, Window: time.Second},
		{Ratio: -1, MinPerSecond: 3, Window: 2 * time.Second},
		{Ratio: 0.2, MinPerSecond: 10, Window: 10 * time.Second},
	} {
		synctest.Test(t, func(t *testing.T) {
			real, err := retry.NewBudget(c)
			if err != nil {
				t.Fatal(err)
			}
			var m budgetModel
			m.init(c, 1, false)
			rng := rand.New(rand.NewPCG(1, 2))
			start := time.Now()
			granted, refused := 0, 0
			for step := range 3000 {
				time.Sleep(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
				now := int64(time.Since(start))
				for range 1 + rng.IntN(3) {
					want := account.AllowRetry(real)
					if got := m.allow(0, now); got != want {
						t.Fatalf("%+v, step %d at %v: model says %v, retry.Budget %v", c, step, time.Duration(now), got, want)
					}
					if want {
						granted++
					} else {
						refused++
					}
				}
				for range rng.IntN(8) {
					account.RecordAttempt(real)
					m.first(0, now)
				}
			}
			if granted == 0 || refused == 0 {
				t.Errorf("%+v: granted %d, refused %d: want both", c, granted, refused)
			}
		})
	}
}
