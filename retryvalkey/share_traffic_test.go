package retryvalkey_test

import (
	"testing"

	"github.com/retrykit/retry/internal/fleettest"
)

// TestShareSyncTraffic measures what one shared Budget costs the server at
// the default interval (see fleettest.ShareSyncTraffic).
func TestShareSyncTraffic(t *testing.T) { fleettest.ShareSyncTraffic(t, shareDial) }
