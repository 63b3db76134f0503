package retryredis_test

// Multi-process tests: the test binary re-executes itself as worker
// processes (TestMain → fleettest.WorkerMain when RETRYKIT_FLEET_WORKER
// is set), each with its own Budget/Throttle and go-redis client, against
// a loopback backend started by the parent and one redis-server. The
// harness is internal/fleettest; this file is its go-redis adapter.

import (
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry/internal/fleettest"
	"github.com/retrykit/retry/retryredis"
	"go.uber.org/goleak"
)

var fleetAdapter = fleettest.Adapter{
	Dial: func(addr string) (fleettest.Client, error) {
		// A client for the syncs, configured as the README recommends: no
		// retries of its own (the next sync is the retry), one dial per
		// sync, and a pool larger than the failed dials of the outage, so
		// that go-redis's dial circuit (after PoolSize failed dials it
		// probes once per second) does not delay the rejoin.
		return fleetClient(redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 100 * time.Millisecond,
			ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond, MaxRetries: -1,
			DialerRetries: 1, PoolSize: 100})), nil
	},
	Leaks: func() error { return goleak.Find() },
}

// fleetClient adapts c to the harness.
func fleetClient(c *redis.Client) fleettest.Client {
	return fleettest.Client{Store: retryredis.ShareStore(c), Close: func() { c.Close() }}
}
