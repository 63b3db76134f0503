package retryredis_test

// Multi-process tests: the test binary re-executes itself as worker
// processes (TestMain → fleettest.WorkerMain when RETRYKIT_FLEET_WORKER
// is set), each with its own Budget/Throttle and go-redis client, against
// a loopback backend started by the parent and one redis-server. The
// harness is internal/fleettest; this file is its go-redis adapter.

import (
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
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
		return fleetClient{redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 100 * time.Millisecond,
			ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond, MaxRetries: -1,
			DialerRetries: 1, PoolSize: 100})}, nil
	},
	Leaks: func() error { return goleak.Find() },
}

type fleetClient struct{ rdb *redis.Client }

func (c fleetClient) ShareBudget(prefix string, b *retry.Budget, o fleettest.ShareOptions) (fleettest.Share, error) {
	return fleetShare(retryredis.ShareBudget(c.rdb, prefix, b, shareOptions(o)...))
}

func (c fleetClient) ShareThrottle(prefix string, t *retry.Throttle, o fleettest.ShareOptions) (fleettest.Share, error) {
	return fleetShare(retryredis.ShareThrottle(c.rdb, prefix, t, shareOptions(o)...))
}

func shareOptions(o fleettest.ShareOptions) []retryredis.ShareOption {
	var opts []retryredis.ShareOption
	if o.Logger != nil {
		opts = append(opts, retryredis.WithLogger(o.Logger))
	}
	if o.SyncInterval != 0 {
		opts = append(opts, retryredis.WithSyncInterval(o.SyncInterval))
	}
	if o.SyncTimeout != 0 {
		opts = append(opts, retryredis.WithSyncTimeout(o.SyncTimeout))
	}
	return opts
}

func (c fleetClient) Close() { c.rdb.Close() }

func fleetShare(s *retryredis.Share, err error) (fleettest.Share, error) {
	if err != nil {
		return nil, err
	}
	return shareCounts{s}, nil
}

type shareCounts struct{ *retryredis.Share }

func (s shareCounts) Counts() (syncs, failures, fallbacks int64) {
	st := s.Stats()
	return st.Syncs, st.Failures, st.Fallbacks
}
