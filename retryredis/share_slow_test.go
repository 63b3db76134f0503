package retryredis_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry/internal/fleettest"
)

// TestShareSlowServer: a paused server makes the share decide locally
// within its timeout, through a client configured as the README says
// (go-redis's 3 s ReadTimeout, which ignores the context's deadline), and
// Close does not wait for the server.
func TestShareSlowServer(t *testing.T) {
	fleettest.ShareSlowServer(t, func(t *testing.T, addr string) fleettest.Client {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
		t.Cleanup(func() { c.Close() })
		return fleetClient(c)
	})
}
