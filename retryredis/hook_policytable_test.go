package retryredis_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/policytable"
	"github.com/retrykit/retry/retryredis"
)

// TestPolicyTable: AddHook refuses exactly the Policy fields that the
// table in docs/engine.md says retryredis refuses, naming them, on a client
// without Options.ContextTimeoutEnabled; with it, AttemptTimeout is
// accepted.
func TestPolicyTable(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no COMMAND call: the address serves nothing
	instrument := func(timeouts bool) func(retry.Policy) error {
		return func(p retry.Policy) error {
			c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: timeouts})
			defer c.Close()
			return retryredis.AddHook(ctx, c, p)
		}
	}
	for _, err := range policytable.Check("../docs/engine.md", "retryredis", "retryredis", instrument(false)) {
		t.Error(err)
	}
	p, _ := policytable.Sample("AttemptTimeout")
	if err := instrument(true)(p); err != nil {
		t.Errorf("AttemptTimeout with ContextTimeoutEnabled: %v", err)
	}
}
