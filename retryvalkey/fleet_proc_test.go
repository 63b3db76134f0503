package retryvalkey_test

// Multi-process tests: the test binary re-executes itself as worker
// processes (TestMain → fleettest.WorkerMain when RETRYKIT_FLEET_WORKER
// is set), each with its own Budget/Throttle and valkey-go client, against
// a loopback backend started by the parent and one redis-server. The
// harness is internal/fleettest; this file is its valkey-go adapter.

import (
	"net"
	"time"

	"github.com/retrykit/retry"
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
			return nil, err
		}
		return fleetClient{rdb}, nil
	},
	Leaks: func() error { return goleak.Find() },
}

type fleetClient struct{ rdb valkey.Client }

func (c fleetClient) ShareBudget(prefix string, b *retry.Budget, o fleettest.ShareOptions) (fleettest.Share, error) {
	return fleetShare(retryvalkey.ShareBudget(c.rdb, prefix, b, shareOptions(o)...))
}

func (c fleetClient) ShareThrottle(prefix string, t *retry.Throttle, o fleettest.ShareOptions) (fleettest.Share, error) {
	return fleetShare(retryvalkey.ShareThrottle(c.rdb, prefix, t, shareOptions(o)...))
}

func shareOptions(o fleettest.ShareOptions) []retryvalkey.ShareOption {
	var opts []retryvalkey.ShareOption
	if o.Logger != nil {
		opts = append(opts, retryvalkey.WithLogger(o.Logger))
	}
	if o.SyncInterval != 0 {
		opts = append(opts, retryvalkey.WithSyncInterval(o.SyncInterval))
	}
	if o.SyncTimeout != 0 {
		opts = append(opts, retryvalkey.WithSyncTimeout(o.SyncTimeout))
	}
	return opts
}

func (c fleetClient) Close() { c.rdb.Close() }

func fleetShare(s *retryvalkey.Share, err error) (fleettest.Share, error) {
	if err != nil {
		return nil, err
	}
	return shareCounts{s}, nil
}

type shareCounts struct{ *retryvalkey.Share }

func (s shareCounts) Counts() (syncs, failures, fallbacks int64) {
	st := s.Stats()
	return st.Syncs, st.Failures, st.Fallbacks
}
