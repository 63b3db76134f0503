package retryredis_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/paired"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retryredis"
)

// BenchmarkGet measures one successful GET against a local redis-server,
// with the bare client (its own retries off) and through the hook; run
// both in one process and compare with benchstat:
//
//	cd retryredis && RETRYKIT_REQUIRE_REDIS=1 go test -run '^$' -bench . -benchmem -count 8 -benchtime 20000x > /tmp/rr.txt
//	cd ../bench && go tool benchstat -col /impl /tmp/rr.txt
func BenchmarkGet(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	run := func(b *testing.B, c *redis.Client) {
		if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if err := c.Get(ctx, "k").Err(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("impl=bare", func(b *testing.B) {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1})
		defer c.Close()
		run(b, c)
	})
	b.Run("impl=retryredis", func(b *testing.B) {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1})
		defer c.Close()
		if err := retryredis.AddHook(ctx, c, retry.Policy{}); err != nil {
			b.Fatal(err)
		}
		run(b, c)
	})
}

// BenchmarkPipeline measures a successful pipeline of 10 GETs.
func BenchmarkPipeline(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	run := func(b *testing.B, c *redis.Client) {
		b.ReportAllocs()
		for b.Loop() {
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for range 10 {
					p.Get(ctx, "k")
				}
				return nil
			})
			if err != nil && err != redis.Nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("impl=bare", func(b *testing.B) {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1})
		defer c.Close()
		run(b, c)
	})
	b.Run("impl=retryredis", func(b *testing.B) {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1})
		defer c.Close()
		if err := retryredis.AddHook(ctx, c, retry.Policy{}); err != nil {
			b.Fatal(err)
		}
		run(b, c)
	})
}

// BenchmarkGetPaired measures what the hook adds to a successful GET
// against a local redis-server, as a share of the call, with
// internal/paired: each of b.N rounds runs blocks of 50 GETs on the bare
// client and on the instrumented one, interleaved (ABBA BAAB), so that the
// machine's drift, far larger than the difference here, hits both alike:
//
//	cd retryredis && RETRYKIT_REQUIRE_REDIS=1 go test -run '^$' -bench GetPaired -benchtime 400x -v .
func BenchmarkGetPaired(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	bare := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1})
	defer bare.Close()
	hooked := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1})
	defer hooked.Close()
	if err := retryredis.AddHook(ctx, hooked, retry.Policy{}); err != nil {
		b.Fatal(err)
	}
	if err := bare.Set(ctx, "k", "v", 0).Err(); err != nil {
		b.Fatal(err)
	}
	get := func(c *redis.Client) func() {
		return func() {
			if err := c.Get(ctx, "k").Err(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("vs=bare", func(b *testing.B) { paired.Measure(max(b.N, 10), 50, get(bare), get(hooked)).Report(b) })
	// The control: a second bare client against the first, which shows the
	// method's own error (the ratio should be 1).
	again := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1})
	defer again.Close()
	b.Run("vs=bare-again", func(b *testing.B) { paired.Measure(max(b.N, 10), 50, get(bare), get(again)).Report(b) })
}
