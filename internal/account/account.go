// Package account drives a retry.Budget or a retry.Throttle without a
// retry.Loop: one attempt or one outcome at a time, as the library's
// tests, test helpers and simulator need to. Users go through retry.Loop
// (or Do), which does this accounting itself; these are package retry's
// unexported methods, found through internal/fleetseam.
package account

import (
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/fleetseam"
)

// Package retry is imported, so initialised first: it has registered.
var (
	budget   = fleetseam.BudgetOf[*retry.Budget]()
	throttle = fleetseam.ThrottleOf[*retry.Throttle]()
)

// RecordAttempt counts a first attempt that is being sent: first attempts
// earn retries.
func RecordAttempt(b *retry.Budget) { budget.RecordAttempt(b) }

// AllowRetry reports whether one more retry fits in b and, if so,
// withdraws it: the retry must then be sent.
func AllowRetry(b *retry.Budget) bool { return budget.AllowRetry(b) }

// BudgetConfig returns b's configuration with every default resolved,
// such that retry.NewBudget(BudgetConfig(b)) makes an equivalent Budget (a
// Ratio or MinPerSecond that was negative is reported as -1).
func BudgetConfig(b *retry.Budget) retry.BudgetConfig {
	r, m, w := budget.Settings(b)
	return retry.BudgetConfig{Ratio: r, MinPerSecond: m, Window: w}
}

// Allow reports whether t lets an attempt through now; when it does, the
// attempt is sent and its outcome given to Record.
func Allow(t *retry.Throttle) bool { return throttle.Allow(t) }

// Record counts the outcome of an attempt that Allow let through.
func Record(t *retry.Throttle, accepted bool) { throttle.Record(t, accepted) }
