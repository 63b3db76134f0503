package retryvalkey_test

// Multi-process tests: the test binary re-executes itself as worker
// processes (TestMain → fleettest.WorkerMain when RETRYKIT_FLEET_WORKER
// is set), each with its own Budget/Throttle and valkey-go client, against
// a loopback backend started by the parent and one redis-server. The
// harness is internal/fleettest; this file is its valkey-go adapter.

import (
	"net"
	"time"

	"github.com/retrykit/retry/internal/fleettest"
	"github.com/retrykit/retry/retryvalkey"
	"github.com/valkey-io/valkey-go"
	"go.uber.org/goleak"
)

var fleetAdapter = fleettest.Adapter{
	Dial: func(addr string) (fleettest.Client, error) {
		rdb, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true,
			DisableRetry: true, Dialer: net.Dialer{Timeout: time.Second}})
		if err != nil {
			return fleettest.Client{}, err
		}
		return fleetClient(rdb), nil
	},
	Leaks: func() error { return goleak.Find() },
}

// fleetClient adapts c to the harness.
func fleetClient(c valkey.Client) fleettest.Client {
	return fleettest.Client{Store: retryvalkey.ShareStore(c), Close: func() { c.Close() }}
}
