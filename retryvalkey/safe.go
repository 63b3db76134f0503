package retryvalkey

import (
	"context"

	"github.com/retrykit/retry/internal/rediscmd"
)

type safeKey struct{}

// MarkSafe returns a context that marks every command sent with it through
// a client from NewClient as safe to repeat, as valkey-go's
// Completed.ToRetryable does for one command: the caller knows that
// applying it twice does no harm.
func MarkSafe(ctx context.Context) context.Context {
	return context.WithValue(ctx, safeKey{}, true)
}

func markedSafe(ctx context.Context) bool {
	v, _ := ctx.Value(safeKey{}).(bool)
	return v
}

// idempotent reports whether a command (valkey-go's words, the name
// first) is an idempotent write or harmless (see rediscmd).
func idempotent(words []string) bool {
	if len(words) == 0 {
		return false
	}
	return rediscmd.IdempotentWrite(words[0], rediscmd.Strings(words[1:])) || rediscmd.Harmless(words[0])
}
