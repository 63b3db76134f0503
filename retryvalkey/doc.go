// Package retryvalkey makes retrykit the one retry layer of a valkey-go
// client (github.com/valkey-io/valkey-go).
//
// valkey-go retries read-only commands, and writes marked ToRetryable, by
// itself until the context ends. This package drives that retry loop with a
// [retry.Policy] (its waits, attempt limit, time budget, Budget and
// Throttle), so that valkey-go's retries follow the policy and no second
// loop is stacked on top. Errors tell a command that may have been applied
// (ErrMaybeApplied) from one that was never sent (ErrNotSent).
package retryvalkey
