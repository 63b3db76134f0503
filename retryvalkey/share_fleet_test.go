package retryvalkey_test

import (
	"testing"

	"github.com/retrykit/retry/internal/fleettest"
)

// The fleet tests are internal/fleettest's, run with this module's test
// binary as the workers (see share_fleet_proc_test.go). Figures for the README:
// go test -run TestFleet -v. RETRYKIT_FLEET_DEFAULTS=1 runs TestFleetBudget
// with the default Budget for 10 s.

// TestFleetBudget: one busy and seven quiet processes retry against an
// always-503 backend; with one shared Budget the fleet's retries stay
// within Ratio × first attempts + MinPerSecond × (T + 2 × Window) + P ×
// allowance over every span; with eight local Budgets the floor is spent
// eight times.
func TestFleetBudget(t *testing.T) { fleettest.FleetBudget(t) }

// TestFleetRedisKilled: redis-server killed while eight processes use a
// shared Budget and Throttle, then restarted empty. No call waits on it
// (p99 of the whole retry path, in memory, under 1 ms during the outage),
// every process falls back within one sync interval plus the timeout and
// rejoins within two sync intervals of the restart; no worker panics or
// leaks a goroutine.
func TestFleetRedisKilled(t *testing.T) { fleettest.FleetRedisKilled(t, raceEnabled) }
