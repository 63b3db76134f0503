package retryredis_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryredis"
)

// AddHook refuses a client that retries by itself; with MaxRetries -1
// and DialerRetries 1 retrykit becomes its one retry layer. (The address is a closed port, so
// the server's command table cannot be read and the built-in one is used.)
func ExampleAddHook() {
	ctx := context.Background()
	p := retry.Policy{Initial: 50 * time.Millisecond, MaxDelay: 2 * time.Second, MaxAttempts: 5}

	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	err := retryredis.AddHook(ctx, c, p)
	fmt.Println(errors.Is(err, retryredis.ErrClientRetries))

	c2 := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	defer c2.Close()
	fmt.Println(retryredis.AddHook(ctx, c2, p))
	// Output:
	// true
	// <nil>
}

// A command that may have been applied is not repeated unless it is safe;
// the caller can tell it from one that was never sent.
func ExampleErrMaybeApplied() {
	handle := func(err error) string {
		switch {
		case err == nil:
			return "done"
		case errors.Is(err, retry.ErrNotSent):
			return "not applied: safe to try again later"
		case errors.Is(err, retry.ErrMaybeApplied):
			return "unknown: check before repeating"
		}
		return "failed: " + err.Error()
	}
	fmt.Println(handle(nil))
	// Output: done
}

// MarkSafe lets one call repeat a command that is not idempotent in
// general, because the caller knows that a repeat does no harm here.
func ExampleMarkSafe() {
	ctx := retryredis.MarkSafe(context.Background())
	_ = ctx // c.Incr(ctx, "visits") would now be retried after a lost reply
	fmt.Println("marked")
	// Output: marked
}

// WithIdempotent declares a client's own commands safe to repeat.
func ExampleWithIdempotent() {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	err := retryredis.AddHook(context.Background(), c, retry.Policy{}, retryredis.WithIdempotent("mymodule.put"))
	fmt.Println(err)
	// Output: <nil>
}
