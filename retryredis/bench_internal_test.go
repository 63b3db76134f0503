package retryredis

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
)

// BenchmarkHookOverhead measures what the hook adds to one successful
// command, without the network: the innermost ProcessHook (the client's
// own) is replaced by one that succeeds at once. Compare impl=bare (that
// function called directly) with impl=hook:
//
//	cd retryredis && go test -run '^$' -bench HookOverhead -benchmem -count 8 > /tmp/ho.txt
//	cd ../bench && go tool benchstat -col /impl /tmp/ho.txt
func BenchmarkHookOverhead(b *testing.B) {
	ctx := context.Background()
	cmd := redis.NewStringCmd(ctx, "get", "k")
	next := redis.ProcessHook(func(ctx context.Context, cmd redis.Cmder) error { return nil })
	b.Run("impl=bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := next(ctx, cmd); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=hook", func(b *testing.B) {
		h := &hook{policy: retry.Policy{}}
		f := h.ProcessHook(next)
		b.ReportAllocs()
		for b.Loop() {
			if err := f(ctx, cmd); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=hook-budget-throttle", func(b *testing.B) {
		h := &hook{policy: retry.Policy{Budget: new(retry.Budget), Throttle: new(retry.Throttle)}}
		f := h.ProcessHook(next)
		b.ReportAllocs()
		for b.Loop() {
			if err := f(ctx, cmd); err != nil {
				b.Fatal(err)
			}
		}
	})
}
