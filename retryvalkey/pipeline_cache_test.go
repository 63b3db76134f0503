package retryvalkey_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/retrykit/retry"
)

// DoMultiCache runs on a Loop of the policy: valkey-go's loop repeats a
// pipeline of cacheable reads whose replies were lost as the Loop says (a
// pipeline of one, so that the server's count is the number of rounds).
func TestDoMultiCache(t *testing.T) {
	checkLoop(t, lostGET, func(ctx context.Context, c valkey.Client) error {
		rs := c.DoMultiCache(ctx, valkey.CT(c.B().Get().Key("a").Cache(), time.Minute))
		for i, r := range rs {
			err := r.Error()
			if err != nil && !valkey.IsValkeyNil(err) {
				if !errors.Is(err, retry.ErrMaybeApplied) {
					t.Errorf("GET %d, its reply lost: %v (%T); want a *CommandError matching retry.ErrMaybeApplied", i, err, err)
				}
				return err
			}
		}
		return nil
	})
}
