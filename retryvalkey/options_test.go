package retryvalkey_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/faultproxy"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retryvalkey"
)

// TestWithIdempotent: an INCR whose reply was lost is not repeated by
// default (it ends maybe-applied); a client made WithIdempotent("incr")
// repeats it, as retryredis's option of the same name does.
func TestWithIdempotent(t *testing.T) {
	srv := redistest.Start(t)
	var once atomic.Bool
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: func(n string) bool {
		return n == "incr" && once.CompareAndSwap(false, true)
	}})
	ctx := context.Background()
	for _, tc := range []struct {
		opts []retryvalkey.Option
		want string // n after the call
	}{
		{nil, "1"},
		{[]retryvalkey.Option{retryvalkey.WithIdempotent("INCR")}, "3"},
	} {
		c, err := retryvalkey.NewClient(ctx, option(px.Addr()), testPolicy(), tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		once.Store(false)
		err = c.Do(ctx, c.B().Incr().Key("n").Build()).Error()
		c.Close()
		switch {
		case tc.opts == nil && !errors.Is(err, retry.ErrMaybeApplied):
			t.Fatalf("INCR after a lost reply: %v; want retry.ErrMaybeApplied", err)
		case tc.opts != nil && err != nil:
			t.Fatalf("INCR declared idempotent, after a lost reply: %v; want it repeated", err)
		}
		if v, _ := srv.Do("GET", "n"); v != tc.want {
			t.Fatalf("n = %q; want %s", v, tc.want)
		}
	}
}
