package retryvalkey_test

import (
	"context"
	"testing"

	"github.com/valkey-io/valkey-go"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/paired"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retryvalkey"
)

// BenchmarkGet measures one successful GET against a local redis-server
// with the bare valkey-go client and through NewClient; compare with
// benchstat:
//
//	cd retryvalkey && RETRYKIT_REQUIRE_REDIS=1 go test -run '^$' -bench . -benchmem -count 8 -benchtime 20000x > /tmp/rv.txt
//	cd ../bench && go tool benchstat -col /impl /tmp/rv.txt
func BenchmarkGet(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	run := func(b *testing.B, c valkey.Client) {
		defer c.Close()
		if err := c.Do(ctx, c.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if err := c.Do(ctx, c.B().Get().Key("k").Build()).Error(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("impl=bare", func(b *testing.B) {
		c, err := valkey.NewClient(option(srv.Addr()))
		if err != nil {
			b.Fatal(err)
		}
		run(b, c)
	})
	b.Run("impl=retryvalkey", func(b *testing.B) {
		c, err := retryvalkey.NewClient(context.Background(), option(srv.Addr()), retry.Policy{})
		if err != nil {
			b.Fatal(err)
		}
		run(b, c)
	})
}

// BenchmarkSet is BenchmarkGet for a write valkey-go does not retry by
// itself (SET, which retryvalkey marks retryable).
func BenchmarkSet(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	run := func(b *testing.B, c valkey.Client) {
		defer c.Close()
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Do(ctx, c.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("impl=bare", func(b *testing.B) {
		c, err := valkey.NewClient(option(srv.Addr()))
		if err != nil {
			b.Fatal(err)
		}
		run(b, c)
	})
	b.Run("impl=retryvalkey", func(b *testing.B) {
		c, err := retryvalkey.NewClient(context.Background(), option(srv.Addr()), retry.Policy{})
		if err != nil {
			b.Fatal(err)
		}
		run(b, c)
	})
}

// BenchmarkIncr: a write that is not safe to repeat, sent through
// retry.Do so that it can be retried while not sent.
func BenchmarkIncr(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	run := func(b *testing.B, c valkey.Client) {
		defer c.Close()
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Do(ctx, c.B().Incr().Key("n").Build()).Error(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("impl=bare", func(b *testing.B) {
		c, err := valkey.NewClient(option(srv.Addr()))
		if err != nil {
			b.Fatal(err)
		}
		run(b, c)
	})
	b.Run("impl=retryvalkey", func(b *testing.B) {
		c, err := retryvalkey.NewClient(context.Background(), option(srv.Addr()), retry.Policy{})
		if err != nil {
			b.Fatal(err)
		}
		run(b, c)
	})
}

// BenchmarkGetPaired measures what NewClient adds to a successful GET
// against a local redis-server, as a share of the call, with
// internal/paired: each of b.N rounds runs blocks of 50 GETs on the bare
// client and on the wrapped one, interleaved (ABBA BAAB), so that the machine's
// drift, far larger than the difference here, hits both alike:
//
//	cd retryvalkey && RETRYKIT_REQUIRE_REDIS=1 go test -run '^$' -bench GetPaired -benchtime 400x -v .
func BenchmarkGetPaired(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	bare, err := valkey.NewClient(option(srv.Addr()))
	if err != nil {
		b.Fatal(err)
	}
	defer bare.Close()
	wrapped, err := retryvalkey.NewClient(context.Background(), option(srv.Addr()), retry.Policy{})
	if err != nil {
		b.Fatal(err)
	}
	defer wrapped.Close()
	if err := bare.Do(ctx, bare.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
		b.Fatal(err)
	}
	get := func(c valkey.Client) func() {
		return func() {
			if err := c.Do(ctx, c.B().Get().Key("k").Build()).Error(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("vs=bare", func(b *testing.B) { paired.Measure(max(b.N, 10), 50, get(bare), get(wrapped)).Report(b) })
	// The control: a second bare client against the first, which shows the
	// method's own error (the ratio should be 1).
	again, err := valkey.NewClient(option(srv.Addr()))
	if err != nil {
		b.Fatal(err)
	}
	defer again.Close()
	b.Run("vs=bare-again", func(b *testing.B) { paired.Measure(max(b.N, 10), 50, get(bare), get(again)).Report(b) })
}
