// Package retryvalkey makes retrykit the one retry layer of a valkey-go
// client (github.com/valkey-io/valkey-go).
//
// valkey-go retries by itself: read-only commands, and writes marked
// ToRetryable, are repeated on any error without a server reply and on
// LOADING, with waits of up to 1 s and no attempt limit, until the context
// ends. A write marked ToRetryable whose reply was lost is applied again:
// measured through a proxy that loses 20 % of the replies, 1,000 INCR calls
// marked ToRetryable left the counter at 1,292 (see docs/redis.md).
//
// [NewClient] keeps valkey-go's loop as the one layer and drives it with a
// [retry.Policy], through ClientOption.RetryDelay: each call of Do,
// DoCache, DoMulti, DoMultiCache and Receive (also on the dedicated
// clients of Dedicated and Dedicate, and on the clients of Nodes) has one
// retry.Loop, which decides valkey-go's repeats of its first send and this
// client's resends alike, as retry.Do decides:
//   - the waits, MaxAttempts (counting every send of the call), Retryable,
//     the Budget and the Throttle are the Loop's; a repeat the Throttle
//     rejects is not sent and costs its attempt and the next wait, waited
//     before valkey-go's. A pipeline's round counts once, however many
//     of its commands valkey-go asks about;
//   - the waits are the Loop's, every jitter included (the Loop knows the
//     previous wait, which valkey-go does not pass);
//   - p.MaxElapsed is the Loop's: no wait starts that would end past it,
//     and a send in flight is not cut, as in retry.Do;
//   - p.AttemptTimeout is refused: valkey-go runs every attempt with the
//     call's context.
//
// # What is repeated
//
// valkey-go's loop repeats, after a lost reply, the commands it knows to be
// read-only and those marked ToRetryable. NewClient's client also marks as
// retryable, before sending: the commands the server's own command table
// flags read-only (COMMAND, read once by NewClient; when it cannot be read,
// a built-in Redis 7 table), which matters for commands built with
// Arbitrary; PING, ECHO, TIME, INFO and LASTSAVE; the
// idempotent writes SET (with EX, PX, EXAT, PXAT, KEEPTTL or XX; not NX or
// GET), SETEX, PSETEX, MSET, DEL, UNLINK, HSET, HMSET, HDEL, SADD, SREM,
// ZADD (not INCR or NX), ZREM, PFADD, LSET, SETRANGE, PERSIST and EXPIRE,
// PEXPIRE, EXPIREAT, PEXPIREAT (not NX), whose effect is the same after one
// run or several (see retryredis for the reasoning); the commands named
// by [WithIdempotent]; and every command sent with a context from
// [MarkSafe]. DoMulti is repeated as a whole only when
// every command in it (MULTI and EXEC aside) is.
//
// A dial or read timeout, which the net package reports as matching
// context.DeadlineExceeded, is an ordinary failure, not the end of the
// call's context. RetryDelay finds the call from the command (valkey-go
// gives it no context); it answers "do not repeat" for a command that no
// call of this client registered, and for a command built once (Pin) and
// sent by two calls at the same time, which it cannot tell apart: each of
// those calls (but DoMultiCache's) then sends it again itself, on its own
// Loop, as it sends a refused command (below). The other methods:
//   - DoStream and DoMultiStream are sent once: valkey-go never repeats
//     them, and neither does this client;
//   - DoMultiCache is repeated, as a whole, by valkey-go's loop only; it
//     is not sent again by this client;
//   - Receive is one call however long the subscription lasts: its
//     resubscriptions after a lost connection are its attempts, and
//     MaxElapsed runs from its start (it does not cut the subscription,
//     only the retries after it);
//   - on a dedicated client valkey-go does not repeat a command whose
//     connection failed (the connection is not reused): refusals are sent
//     again by this client, a lost reply ends the call.
//
// A call's first send goes through valkey-go's loop; after
// that, the call sends the command again, rebuilt from its words (valkey-go
// recycles a command once the server answered it, so the client keeps
// the words before sending), when:
//   - the server refused it without running it: BUSY, TRYAGAIN,
//     CLUSTERDOWN, MASTERDOWN, READONLY, NOREPLICAS or "max number of
//     clients", for any command, INCR included (LOADING, and in a cluster
//     TRYAGAIN and CLUSTERDOWN, valkey-go's loop repeats by itself when the
//     command is retryable there; otherwise this client sends it again);
//   - it was not sent: its connection could not be dialled;
//   - its reply was lost on a resend and it is safe to repeat.
//
// A resend is not retryable in valkey-go's loop: the call's Loop alone
// decides it. The Budget, Throttle, MaxAttempts and MaxElapsed bound every
// send of the call, valkey-go's repeats included. A resend of DoCache goes through Do: the
// server answers it, not the client-side cache. A resend is not read-only
// either: in a cluster it goes to the primary even when
// ClientOption.SendToReplicas would have chosen a replica. In a pipeline
// without MULTI, DoMulti sends again the failed tail of the pipeline (every
// command from the first failure on failed), in order, when each command
// in it was refused or not sent (or lost its reply and all are safe); a
// failure followed by a success is not sent again, since it would then run
// after a command meant to run after it. A MULTI ... EXEC block is sent
// again only by valkey-go's loop.
//
// valkey-go writes commands from a background goroutine, several at a time,
// so a failed write may follow another command's successful one: after a
// connection was reset, the first command written to it fails with "may
// have been applied", and only later ones meet a refused dial.
//
// Replies that say the request is wrong (ERR, WRONGTYPE, NOSCRIPT, ...) are
// never repeated. Replies come back as valkey-go returns them
// (*valkey.ValkeyError, the last one when a refusal outlasted the policy),
// except after a send of the call lost its reply: then the reply is
// wrapped in a [*CommandError] matching retry.ErrMaybeApplied (errors.As still
// reaches the *valkey.ValkeyError);
// a failure without a reply comes back as a [*CommandError] matching
// [retry.ErrNotSent] or [retry.ErrMaybeApplied] (from Do and DoCache inside the
// *retry.Error of the loop when it made more than one send; DoMulti
// returns each command's own *CommandError). valkey-go's ErrClosing is
// "not sent" only for a call made after Close returned: valkey-go also
// answers it to commands already written when the client closes. Once a
// send of this client's loop lost its reply, a later unsent send does not
// make the call's error match retry.ErrNotSent, nor does it after a repeat
// by valkey-go's loop that lost its reply (the call's Loop judges those
// repeats). The repeats valkey-go's loop made of a DoMulti pipeline's first
// send are judged bare, so after such a send that ended unsent an earlier
// repeat may have been applied (its commands were safe to repeat).
//
// A script (EVAL, EVALSHA, FCALL) that writes and then returns an error
// reply beginning with a refusal code (LOADING, BUSY, READONLY, ...) is
// taken for the server's refusal, which means the script did not run, and
// is run again: scripts should not answer with those codes.
//
// # Observing
//
// The policy's Observer and Logger see the call's events as retry.Do
// reports them, valkey-go's repeats included, with the context of the send
// (a child of the call's), and one EventDone per call with the reason the
// Loop gave up for. One difference remains: a repeat is granted (Budget
// retry taken, failure counted by the Throttle, EventRetry and
// EventAttempt told) before valkey-go compares the wait with the context's
// deadline; the Loop gives up on a wait that would pass it, but valkey-go
// reads the clock later and may skip a wait that ends just before it, so
// that the call ends with an attempt counted that was not made.
//
// The EventDone's Err is the call's *retry.Error, except after a send that
// lost its reply and a loop that then ended without sending again: the
// call returns a copy whose Err also matches retry.ErrMaybeApplied.
//
// # The wire
//
// Nothing is added to the commands: a retry is a new send of the same
// words. The success path adds no allocation (see BenchmarkGet and
// TestWrapperSuccessAllocatesNothing).
//
// # Sharing a budget across a fleet
//
// retryshare.Budget and retryshare.Throttle, given the client through
// [ShareStore], make a retry.Budget or retry.Throttle in each process decide as one shared by every process that uses the
// same key prefix on the same Valkey (or Redis, or Memorystore) server.
// Requests never wait on the server: each process decides from its own
// counts plus the fleet's counts as of the last background sync (one
// EVALSHA every 100 ms by default), and decides alone while the server is
// slow or down. The client is the caller's, configured as they need (AUTH,
// TLS, cluster, Sentinel); see docs/storms.md, "Sharing a budget across a
// fleet". The keys and the script are those of retryredis, so processes
// using go-redis and processes using valkey-go share one budget.
//
// # License
//
// Apache License 2.0: see the LICENSE file in this module's directory.
package retryvalkey
