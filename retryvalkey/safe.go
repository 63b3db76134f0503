package retryvalkey

import (
	"context"

	"github.com/retrykit/retry/internal/rediscmd"
)

// safeMark is the mark of MarkSafe.
var safeMark rediscmd.SafeMark

// MarkSafe returns a context that marks every command sent with it through
// a client from NewClient as safe to repeat, as valkey-go's
// Completed.ToRetryable does for one command: the caller knows that
// applying it twice does no harm. The mark is retryvalkey's own:
// retryredis does not see it.
func MarkSafe(ctx context.Context) context.Context { return safeMark.Mark(ctx) }

// idempotent reports whether a command (valkey-go's words, the name
// first) is an idempotent write or harmless (see rediscmd).
func idempotent(words []string) bool {
	if len(words) == 0 {
		return false
	}
	return rediscmd.IdempotentWrite(words[0], rediscmd.Strings(words[1:])) || rediscmd.Harmless(words[0])
}
