package retryvalkey_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryvalkey"
)

// NewClient refuses options that would add or remove a retry layer.
func ExampleNewClient() {
	p := retry.Policy{Initial: 50 * time.Millisecond, MaxDelay: 2 * time.Second, MaxAttempts: 5}
	_, err := retryvalkey.NewClient(context.Background(), valkey.ClientOption{InitAddress: []string{"127.0.0.1:6379"}, DisableRetry: true}, p)
	fmt.Println(err)
	// Output: retryvalkey: NewClient: ClientOption.DisableRetry is set: valkey-go's retry loop is the one retrykit drives
}

// MarkSafe lets one call repeat a command that is not idempotent in
// general.
func ExampleMarkSafe() {
	ctx := retryvalkey.MarkSafe(context.Background())
	_ = ctx // client.Do(ctx, client.B().Incr().Key("visits").Build()) may now be repeated
	fmt.Println("marked")
	// Output: marked
}

// Telling a command that was never sent from one that may have been
// applied.
func ExampleErrMaybeApplied() {
	err := error(nil) // client.Do(ctx, cmd).Error()
	switch {
	case err == nil:
		fmt.Println("done")
	case errors.Is(err, retry.ErrNotSent):
		fmt.Println("not applied")
	case errors.Is(err, retry.ErrMaybeApplied):
		fmt.Println("unknown: check before repeating")
	}
	// Output: done
}
