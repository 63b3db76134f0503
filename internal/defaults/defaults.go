// Package defaults holds the tuning defaults of the core's Budget,
// Throttle and Hedger: package retry applies them where a config field is
// zero (and to the zero values), and sim and the CLI model and show the
// same figures. They are documented to users on the config fields that
// they fill in; they are not exported from package retry, so that a
// default is stated once, on its field.
package defaults

import "time"

// Budget (retry.BudgetConfig).
const (
	// BudgetRatio: retries may be at most 10% of recent first attempts,
	// the Google SRE book's per-client retry budget, so that the
	// worst-case load on a failing backend is 1.1x its normal load instead
	// of MaxAttempts times it.
	BudgetRatio = 0.1
	// BudgetMinPerSecond: a floor of 1 retry per second (averaged over the
	// window) that a quiet client may use whatever its traffic; the SRE
	// book's server-wide example is 60 retries per minute per process.
	BudgetMinPerSecond = 1.0
	// BudgetWindow: first attempts and retries are remembered for 10 s,
	// Finagle's RetryBudget TTL.
	BudgetWindow = 10 * time.Second
)

// Throttle (retry.ThrottleConfig).
const (
	// ThrottleK is the SRE book's typical multiplier: the Throttle starts
	// rejecting once fewer than 1/K of the attempts it sent were accepted.
	ThrottleK = 2.0
	// ThrottleWindow is the history the counts are kept over: 10 s, so
	// that after an outage the failures it remembers are gone within
	// seconds (go-zero's breaker uses 10 s; the SRE book's 2 minutes kept
	// clients out for minutes after an outage).
	ThrottleWindow = 10 * time.Second
	// ThrottleMaxProbability caps the rejection probability, as
	// failsafe-go's adaptive throttler does: at least 10 % of the demand
	// is still sent while the backend refuses everything, and those
	// attempts are what tells the Throttle the backend is back.
	ThrottleMaxProbability = 0.9
)

// Hedger (retry.HedgeConfig).
const (
	// HedgeQuantile: an adaptive Hedger sends a hedge once a copy has been
	// outstanding longer than the 95th percentile of recent successful
	// attempts, the point "The Tail at Scale" recommends (about 5 % extra
	// load when latencies are independent).
	HedgeQuantile = 0.95
	// HedgeMinDelay is the floor of an adaptive delay (Finagle's
	// BackupRequestFilter uses the same 1 ms).
	HedgeMinDelay = time.Millisecond
	// HedgeWarmUp is how many latencies an adaptive Hedger records before
	// it sends its first hedge.
	HedgeWarmUp = 100
	// HedgeSamples is how many recent latencies an adaptive Hedger keeps
	// (8 KB).
	HedgeSamples = 1000
	// HedgeMaxCopies is the most copies of one call in flight at once, the
	// first included: 5, as gRFC A6's default cap on the attempts of a
	// hedged call.
	HedgeMaxCopies = 5
)
