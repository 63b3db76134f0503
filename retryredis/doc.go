// Package retryredis makes retrykit the one retry layer of a go-redis v9
// client (github.com/redis/go-redis/v9).
//
// A go-redis client already retries: with its defaults it repeats every
// command up to 3 times on network errors and on LOADING, READONLY,
// MASTERDOWN, CLUSTERDOWN and TRYAGAIN replies, whether or not the command
// is safe to repeat. A command written to the server whose reply is lost
// may have been applied; repeating INCR, LPUSH or XADD then applies it twice.
//
// This package replaces that layer with a [retry.Policy]: it retries a
// command that never reached the server, and, once a command was written,
// only a command that is safe to repeat (read-only, idempotent, or marked
// safe by the caller). Everything else gets its error back at once, wrapped
// so that errors.Is tells ErrMaybeApplied from ErrNotSent.
package retryredis
