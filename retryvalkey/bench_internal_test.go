package retryvalkey

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/valkey-io/valkey-go"

	"github.com/retrykit/retry"
)

// instant is a valkey.Client whose Do succeeds at once, without the
// network; its commands come from a real client's builder.
type instant struct {
	valkey.Client
	ok valkey.ValkeyResult
}

func (c *instant) Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult { return c.ok }

// BenchmarkWrapperOverhead measures what NewClient's wrapper adds to one
// successful command, without the network. Compare impl=bare with
// impl=wrapper:
//
//	cd retryvalkey && RETRYKIT_REQUIRE_REDIS=1 go test -run '^$' -bench WrapperOverhead -benchmem -count 8 > /tmp/wo.txt
//	cd ../bench && go tool benchstat -col /impl /tmp/wo.txt
func BenchmarkWrapperOverhead(b *testing.B) {
	real := bareClient(b)
	ctx := context.Background()
	inner := &instant{Client: real, ok: valkey.NewResult(valkey.ValkeyMessage{}, nil)}
	for _, kind := range []string{"get", "set", "incr"} {
		build := func() valkey.Completed {
			switch kind {
			case "get":
				return real.B().Get().Key("k").Build()
			case "set":
				return real.B().Set().Key("k").Value("v").Build()
			}
			return real.B().Incr().Key("k").Build()
		}
		cmd := build().Pin()
		b.Run("cmd="+kind+"/impl=bare", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := inner.Do(ctx, cmd).Error(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("cmd="+kind+"/impl=wrapper", func(b *testing.B) {
			c := &client{Client: inner, r: &retryer{p: retry.Policy{}}, closed: new(atomic.Bool)}
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Do(ctx, cmd).Error(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Deciding whether a write may be repeated allocates nothing: the success
// path of an idempotent write (SET) and of any other write (INCR, which
// goes through retry.Do) stays free of garbage.
func TestWrapperSuccessAllocatesNothing(t *testing.T) {
	real := bareClient(t)
	ctx := context.Background()
	inner := &instant{Client: real, ok: valkey.NewResult(valkey.ValkeyMessage{}, nil)}
	c := &client{Client: inner, r: &retryer{p: retry.Policy{}}, closed: new(atomic.Bool)}
	for name, cmd := range map[string]valkey.Completed{
		"GET":  real.B().Get().Key("k").Build().Pin(),
		"SET":  real.B().Set().Key("k").Value("v").Build().Pin(),
		"INCR": real.B().Incr().Key("k").Build().Pin(),
	} {
		// The least of three measures: under -race, sync.Pool drops a
		// quarter of what it is given back, on purpose, and a garbage
		// collection empties it, so one measure of a loaded machine may
		// count the pool's refills; an allocation of the command's own
		// shows in all three.
		n := testing.AllocsPerRun(200, func() { c.Do(ctx, cmd) })
		for range 2 {
			n = min(n, testing.AllocsPerRun(200, func() { c.Do(ctx, cmd) }))
		}
		if n != 0 {
			t.Errorf("%s: %v allocations per successful command, want 0", name, n)
		}
	}
}
