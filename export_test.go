package retry

import "github.com/retrykit/retry/internal/fleetseam"

// The sharing seam under the names it had when it was exported, for the
// tests of this package (internal and external) only; other packages reach
// it through internal/fleetseam.

type FleetLease = fleetseam.Lease

func (b *Budget) LocalCounts() (firstAttempts, retries int64) { return b.localCounts() }
func (b *Budget) SetFleet(firstAttempts, retries int64, lease FleetLease) {
	b.setFleet(firstAttempts, retries, lease)
}
func (b *Budget) ClearFleet()                              { b.clearFleet() }
func (b *Budget) FleetAsked() int64                        { return b.fleetAsked() }
func (t *Throttle) LocalCounts() (requests, accepts int64) { return t.localCounts() }
func (t *Throttle) SetFleet(requests, accepts int64)       { t.setFleet(requests, accepts) }
func (t *Throttle) ClearFleet()                            { t.clearFleet() }
