// Package retryvalkey makes retrykit the one retry layer of a valkey-go
// client (github.com/valkey-io/valkey-go).
//
// valkey-go retries by itself: read-only commands, and writes marked
// ToRetryable, are repeated on any error without a server reply and on
// LOADING, with waits of up to 1 s and no attempt limit, until the context
// ends. A write marked ToRetryable whose reply was lost is applied again:
// measured through a proxy that loses 20 % of the replies, 1,000 INCR calls
// marked ToRetryable left the counter at 1,292 (see the README).
//
// [NewClient] keeps valkey-go's loop as the one layer and drives it with a
// [retry.Policy], through ClientOption.RetryDelay:
//   - the wait before retry n is p.Delay(n) (any jitter but
//     DecorrelatedJitter, since valkey-go does not pass the previous wait);
//   - the loop stops at p.MaxAttempts, when p.Retryable rejects the error,
//     when p.Budget refuses a retry, or when p.Throttle rejects the next
//     attempt (valkey-go cannot skip one attempt, so a rejection ends the
//     call with its last error; a first attempt the Throttle rejects is not
//     sent and fails with retry.ErrThrottled);
//   - p.MaxElapsed becomes a deadline on the call's context, which
//     valkey-go honours by starting no wait that would pass it (unlike
//     retry.Do, it also bounds the attempt in flight);
//   - p.AttemptTimeout is refused: valkey-go runs every attempt with the
//     call's context.
//
// # What is repeated
//
// valkey-go's loop repeats, after a lost reply, the commands it knows to be
// read-only and those marked ToRetryable. NewClient's client also marks as
// retryable, before sending: PING, ECHO, TIME, INFO and LASTSAVE; the
// idempotent writes SET (with EX, PX, EXAT, PXAT, KEEPTTL or XX; not NX or
// GET), SETEX, PSETEX, MSET, DEL, UNLINK, HSET, HMSET, HDEL, SADD, SREM,
// ZADD (not INCR or NX), ZREM, PFADD, LSET, SETRANGE, PERSIST and EXPIRE,
// PEXPIRE, EXPIREAT, PEXPIREAT (not NX), whose effect is the same after one
// run or several (see retryredis for the reasoning); and every command sent
// with a context from [MarkSafe]. DoMulti is repeated as a whole only when
// every command in it (MULTI and EXEC aside) is.
//
// Any other command is sent by the client through retry.Do with p and
// repeated only when it was not sent: its connection could not be dialled.
// valkey-go writes commands from a background goroutine, several at a time,
// so a failed write may follow another command's successful one: after a
// connection was reset, the first command written to it fails with "may
// have been applied", and only later ones meet a refused dial.
//
// Server replies: valkey-go repeats LOADING only, and recycles a command
// once the server has answered it, so the other refusals (BUSY, TRYAGAIN,
// CLUSTERDOWN, MASTERDOWN, READONLY, NOREPLICAS) are returned to the caller
// at once, not retried. Replies that say the request is wrong (ERR,
// WRONGTYPE, NOSCRIPT, ...) are never repeated. Replies come back as
// valkey-go returns them (*valkey.ValkeyError); a failure without a reply
// comes back as a [*CommandError] matching [ErrNotSent] or
// [ErrMaybeApplied] (for a command sent through retry.Do, inside the
// *retry.Error of the loop when it made more than one attempt).
//
// # Observing
//
// The policy's Observer sees every attempt, retry, Budget refusal and
// Throttle rejection. Those of valkey-go's loop are reported with
// context.Background(), because RetryDelay gets no context, and the final
// EventDone of such a call has Attempt 0 (valkey-go does not tell how many
// attempts it made) and Err set to the last error, not a *retry.Error. A
// Throttle's own Accepted rule is not consulted for those attempts: they
// are counted with its default rule (timeouts and errors with
// Overloaded() true are rejections). The Policy's Logger is not used by
// valkey-go's loop.
//
// # The wire
//
// Nothing is added to the commands: a retry is a new send of the same
// command. The success path adds no allocation (see BenchmarkGet).
//
// # Sharing a budget across a fleet
//
// [ShareBudget] and [ShareThrottle] make a retry.Budget or retry.Throttle
// in each process decide as one shared by every process that uses the
// same key prefix on the same Valkey (or Redis, or Memorystore) server.
// Requests never wait on the server: each process decides from its own
// counts plus the fleet's counts as of the last background sync (one
// EVALSHA every 100 ms by default), and decides alone while the server is
// slow or down. The client is the caller's, configured as they need (AUTH,
// TLS, cluster, Sentinel); see the README section "Sharing a budget across
// a fleet". The keys and the script are those of retryredis, so processes
// using go-redis and processes using valkey-go share one budget.
package retryvalkey
