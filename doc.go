// Package retry retries a failing operation with truncated exponential
// backoff and jitter, with the wait rule and the stop rules kept apart.
//
// # Quick start
//
//	err := retry.Do(ctx, retry.Policy{}, func(ctx context.Context) error {
//		return callTheService(ctx)
//	})
//
// [Do] calls the operation until it succeeds or a stop rule ends the loop;
// [DoValue] does the same for an operation that returns a value. The zero
// [Policy] is the reference behaviour described below, so most callers only
// set the fields they want to change.
//
// # The wait rule
//
// The wait before retry n (n = 0 for the first retry) is
//
//	min(Initial * Multiplier^n + random, MaxDelay)
//
// With the zero Policy, Initial is 1 s, Multiplier 2, MaxDelay 32 s and
// random is drawn uniformly from 0..1000 ms anew for every wait: the
// published cloud guidance (Memorystore, Cloud Storage, IoT Core). The waits
// are 1 s + r, 2 s + r, 4 s + r, … until they reach 32 s. The zero Jitter
// draws random from 0..min(1 s, Initial): the published range at Initial
// 1 s or more, scaled down with a smaller Initial (Initial 10 ms waits
// 10..20 ms before the first retry). Reaching MaxDelay
// ends the growth of the waits, not the retries: the loop then keeps waiting
// MaxDelay between attempts until a stop rule ends it. Without jitter,
// Initial 1 s, Multiplier 2, MaxDelay 4 s and 5 attempts give exactly the
// waits 1 s, 2 s, 4 s, 4 s. [Policy.Delays] yields a policy's schedule and
// [Policy.Bounds] the range each wait is drawn from.
//
// Every wait lies in [0, MaxDelay] for every retry number, including 10^6
// and beyond: the arithmetic saturates at MaxDelay instead of overflowing,
// for any Initial, Multiplier and MaxDelay up to the int64 limit.
// [Immediate], as Initial, makes every computed wait zero, for tests and
// benchmarks.
//
// # The stop rules
//
// Independently of the waits, the loop stops at the first of:
//   - success;
//   - MaxAttempts attempts, the first included (zero means 10; [Unlimited]
//     removes the limit);
//   - an error that may not be retried: one marked [Permanent], one that
//     Policy.Retryable rejects, a context error returned by the operation
//     when Retryable is nil (context.Canceled or context.DeadlineExceeded
//     itself in the error's chain; a timeout that only matches
//     context.DeadlineExceeded through its Is method, as net's dial timeout
//     and net/http's timeouts do, is retried, and so is an attempt's own
//     Policy.AttemptTimeout, whatever Retryable says), or an error of an inner
//     retry loop that already gave up (see Nesting below);
//   - the time budget MaxElapsed, or the context's deadline, when the next
//     wait would not end before it: the loop then gives up at once rather
//     than sleep into a certain failure;
//   - the context's cancellation, which ends a wait at once;
//   - a shared [Budget] refusing the retry.
//
// On giving up, Do returns an [*Error] that wraps the last attempt's error
// (errors.Is and errors.As see through it) and tells the number of attempts,
// the elapsed time and the [Reason]. When the context ended the loop,
// errors.Is(err, context.Canceled) or errors.Is(err,
// context.DeadlineExceeded) also holds, so neither the cause nor the last
// error is lost. An invalid Policy is reported by [Policy.Validate], whose
// error Do returns without calling the operation.
//
// # Choosing a jitter
//
// Jitter keeps clients that failed together from retrying together.
// The default, AdditiveJitter(1 s), is the cloud guidance; it adds little
// once the waits are long, and none at the cap, where min() removes it.
// [FullJitter] (uniform 0..d) spreads a herd of clients the most and does
// the least total work, which makes it the better choice for large fleets
// hitting one backend (the AWS SDKs use it). [EqualJitter] keeps half of
// each wait. [DecorrelatedJitter], min(MaxDelay, U(Initial, 3 × previous
// wait)), ignores Multiplier and piles waits up at the cap. [ProportionalJitter] (d × (1 ± f)) is
// gRPC's ±20 % connection backoff, still capped at MaxDelay. [NoJitter] is
// for tests and single clients. Random numbers come from math/rand/v2's
// process-wide source, seeded from the operating system, so two processes
// started in the same second draw different waits, and parallel callers
// take no global lock; [Policy.Delay] accepts a seeded *rand.Rand for a
// reproducible schedule.
//
// # Server hints
//
// An operation that learns how long the server wants it to wait (an HTTP
// Retry-After, a gRPC pushback) returns [ServerWait](err, d). The loop then waits
// max(d, computed wait). Server waits are not capped by MaxDelay, because
// retrying sooner than asked only earns another refusal; instead, a wait
// that would not end within MaxElapsed or before the context's deadline
// makes the loop give up at once. Cap what you accept from a server before
// calling After, or set MaxElapsed or a context deadline.
//
// # Nesting
//
// Retry at one layer only, the one next to the failure: 4 attempts at each
// of 3 layers would be 64 calls on the bottom service. So an error that
// reports [IsExhausted] (an [*Error] from an inner Do, or any error with a
// method Exhausted() bool returning true) ends an enclosing loop at once
// with [ReasonExhausted] (with ReasonPermanent when it is also marked
// [Permanent], as the error of an inner loop that gave up on a permanent
// error is): an inner loop of 4 attempts inside an outer loop of 4 makes 4
// calls, not 16. Set Policy.RetryExhausted to retry such errors anyway
// (never a Permanent one).
//
// # Hedging
//
// Retries answer failures; hedges answer slowness. [Hedge] and
// [HedgeValue] are Do and DoValue for an operation that is safe to run
// several times at once (a read, a request with an idempotency key): once
// a copy has been outstanding a [Hedger]'s delay, another copy is sent
// without cancelling the first, and the first success wins. The delay is
// fixed, or adaptive: a quantile of recent successful latencies. Hedging
// is an entry point of its own, not a Policy field, because it asks more
// of the operation than retrying does (copies run at the same time), and
// the integration modules that take a Policy keep per-call state that
// assumes one attempt at a time; &Hedger{} hedges with the defaults and a
// nil Hedger is refused with an error (Do is the call without hedging). The
// Policy keeps every other role: MaxAttempts caps the copies in all, a
// burst whose copies all failed is retried after the policy's wait, and
// every copy beyond the first is a retry for the Budget and goes through
// the Throttle, so one Budget bounds hedges and retries together. The
// Hedger holds the only state that outlives a call, the adaptive
// latencies, and is shared as a Budget is.
//
// # Concurrency
//
// A Policy is a plain value holding no per-call state: one Policy may be
// copied, shared and used by any number of goroutines and calls at once.
// The [Budget] and [Throttle] it may point to are shared on purpose and safe
// for concurrent use. The Observer and the Logger run on the goroutine
// that called Do.
//
// # Performance
//
// When the operation succeeds at the first attempt, Do and DoValue allocate
// nothing and read no clock (with a Budget or Throttle set, one clock read
// every 64 calls); they cost about 15 ns more than calling the
// operation directly (2-core machine), several times less than the other Go
// retry libraries. A loop that retries uses at most one timer, created at
// the first non-zero wait and reused for the others, and allocates nothing
// per retry beyond the returned [*Error] and what the caller's errors need.
// Computing a wait allocates nothing. The package's benchmarks measure
// these paths: go test -run '^$' -bench . -benchmem.
//
// # License
//
// Apache License 2.0: see the LICENSE file in this module's directory.
package retry
