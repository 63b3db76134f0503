// Package retryredis makes retrykit the one retry layer of a go-redis v9
// client (github.com/redis/go-redis/v9).
//
// A go-redis client already retries: with its defaults (MaxRetries 3,
// 10 ms to 1 s apart) it repeats every command on EOF, dial and pool
// errors, timeouts and LOADING, READONLY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN
// and NOREPLICAS replies, whether or not the command is safe to repeat. A
// command written to the server whose reply is lost may have been applied:
// repeating INCR, LPUSH or XADD then applies it twice. Measured through a
// proxy that loses 20 % of the replies, 1,000 INCR calls left the counter
// at 1,288 (see docs/redis.md).
//
// [AddHook] replaces that layer with a [retry.Policy]: it refuses a
// client whose MaxRetries is not -1 or whose DialerRetries is not 1 (two
// layers would multiply attempts, and dials) and adds a hook that runs every command, pipeline and MULTI/EXEC
// transaction through retry.Do, so the policy's waits, MaxAttempts,
// MaxElapsed, AttemptTimeout, Budget, Throttle, Observer and Logger apply
// as they do to any retry.Do call. One difference: after a send that lost
// its reply and a loop that then ended without sending again (a Throttle
// rejected the retry), the call returns a copy of the *retry.Error whose
// Err also matches retry.ErrMaybeApplied, while the Observer's EventDone has
// the loop's own.
//
// # What is repeated
//
// A failed attempt is retried when the command:
//   - never reached the server: a dial error, a pool timeout, or a write
//     error of a single command (Redis runs only whole commands, and a
//     failed write leaves the server with part of one); errors match
//     [retry.ErrNotSent];
//   - was refused by the server without being run: LOADING, BUSY,
//     TRYAGAIN, CLUSTERDOWN, MASTERDOWN, READONLY (a failover in
//     progress), NOREPLICAS, or "ERR max number of clients reached";
//   - was written but its reply was lost (EOF, reset, read timeout; errors
//     match [retry.ErrMaybeApplied]), and it is safe to repeat: read-only by the
//     server's own command table (read once with COMMAND by AddHook,
//     with a built-in table of Redis 7's read-only commands as fallback),
//     harmless (PING, ECHO, TIME, INFO, LASTSAVE), an idempotent write of
//     the list below, named by [WithIdempotent], or sent with a context from
//     [MarkSafe].
//
// Idempotent writes: SET (with EX, PX, EXAT, PXAT, KEEPTTL or XX; not NX,
// whose reply is the point of the call and would say "not set" after a
// repeat of a successful call, not GET, and not options it does not know),
// SETEX, PSETEX, MSET, DEL, UNLINK, HSET, HMSET, HDEL, SADD, SREM, ZADD
// (not INCR or NX), ZREM, PFADD, LSET, SETRANGE, PERSIST, and EXPIRE,
// PEXPIRE, EXPIREAT, PEXPIREAT (not NX). Their effect is the same after one
// run or several; the reply to a repeat can differ (DEL counts 0 keys,
// HSET 0 new fields), and relative expiries restart from the repeat.
// Arguments are read as the server reads them: each as go-redis writes it
// (a []byte, *string, number, time.Time or encoding.BinaryMarshaler counts
// as the bytes it puts on the wire; MarshalBinary is called again to find
// out, and an argument whose MarshalBinary then fails counts as any
// option), names and options in ASCII case only, and an option up to a
// NUL byte ("NX\x00" is NX).
//
// A command with an argument of a type go-redis refuses to write (a
// []string, a struct that is not an encoding.BinaryMarshaler) is never
// written whole, so it is not retried: the call ends at its first attempt
// with go-redis's error, matching retry.ErrNotSent (in a plain pipeline after
// other commands, which may have been written, retry.ErrMaybeApplied).
//
// A pipeline or MULTI/EXEC transaction is repeated as a whole: when it was
// not sent, or when every command in it (MULTI and EXEC aside) is safe. A
// write error in a pipeline counts as "may have been applied", since
// earlier commands may have been written whole. A transaction that EXEC
// aborted (EXECABORT) because a command was refused when queued counts as
// refused, unless a WATCH went through the client: the abort also ended
// the WATCH, which a repeat would bypass.
//
// Never retried: replies that say the request itself is wrong (ERR,
// WRONGTYPE, NOSCRIPT, EXECABORT, OOM, BUSYKEY, BUSYGROUP, ...): waiting
// does not make an invalid request valid. Such a reply at the first attempt
// is returned exactly as go-redis returns it (a redis.Error); redis.Nil is
// a success. Every other failure is the *retry.Error of the loop, which
// wraps a [*CommandError] (errors.Is and errors.As reach the client's
// error, retry.ErrNotSent or retry.ErrMaybeApplied) and tells an enclosing retry loop
// not to retry again (retry.IsExhausted). The call's error remembers its
// earlier attempts: once one lost its reply, the error matches
// retry.ErrMaybeApplied (never retry.ErrNotSent), even when the last attempt was not
// sent, was refused, or met an error reply (then wrapped in a
// *CommandError too).
//
// Commands that set up the connection they are sent on (HELLO, AUTH,
// SELECT, CLIENT ..., READONLY, READWRITE, RESET, QUIT) go straight to the
// client: go-redis sends them itself, through the hooks, when it opens a
// connection, which happens inside an attempt of the hook's loop, and a
// repeat on another connection would not restore the state. They are not
// retried, counted by a Budget or Throttle, or observed.
//
// # Layers and what the wire sees
//
// Nothing is added to the commands: the server sees the same commands as
// from the bare client, and a retry is a new send of the same command. With
// MaxRetries -1 go-redis makes one attempt per call, so every attempt the
// server sees is one the policy allowed; with DialerRetries 1 it dials once
// per attempt that needs a connection, so a server that is down sees the
// dials the policy allowed, not five times as many. In a
// transaction started with Client.Watch, go-redis keeps the one connection
// that holds the WATCH and never replaces it, so once that connection is
// broken the retries fail at once without sending anything (a WATCH is
// never bypassed); the same holds for a Client.Conn, whose connection state
// (SELECT, CLIENT SETNAME) a retry on another connection would lose.
//
// Policy.AttemptTimeout needs a client with Options.ContextTimeoutEnabled,
// without which go-redis bounds reads and writes with ReadTimeout and
// WriteTimeout and the attempt's context would only bound the wait for a
// pooled connection and the dial: AddHook refuses it there. A
// timed-out attempt may have been applied: it is retried only when the
// command is safe.
//
// AddHook supports *redis.Client (including clients
// from NewFailoverClient). Cluster clients are not supported: go-redis
// follows MOVED and ASK redirects and retries network errors and
// CLUSTERDOWN/TRYAGAIN in one loop bounded by ClusterOptions.MaxRedirects,
// so their retries cannot be turned off without losing redirects. Ring
// clients are not supported yet. go-redis's AutoPipeline is not covered:
// it batches many callers' commands into pipelines under its own context
// (a call's MarkSafe is not seen there), and its Close sends an already
// attempted command once more by itself.
//
// A script (EVAL, EVALSHA, FCALL) that writes and then returns an error
// reply beginning with a refusal code (LOADING, BUSY, READONLY, ...) is
// taken for the server's refusal, which means the script did not run, and
// is run again: scripts should not answer with those codes.
//
// The success path adds no allocation and no clock reading to a command
// (see BenchmarkGet).
//
// # Sharing a budget across a fleet
//
// retryshare.Budget and retryshare.Throttle, given the client through
// [ShareStore], make a retry.Budget or retry.Throttle in each process decide as one shared by every process that uses the
// same key prefix on the same Redis (or Valkey, or Memorystore) server.
// Requests never wait on the server: each process decides from its own
// counts plus the fleet's counts as of the last background sync (one
// EVALSHA every 100 ms by default), and decides alone while the server is
// slow or down. The client is the caller's, configured as they need (AUTH,
// TLS, cluster, Sentinel); see docs/storms.md, "Sharing a budget across a
// fleet".
//
// # License
//
// Apache License 2.0: see the LICENSE file in this module's directory.
package retryredis
