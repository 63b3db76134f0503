package retry

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults used where a [Policy] field is zero. Together they are the
// published cloud guidance: wait min(2^n s + random 0..1000 ms, 32 s) before
// retry n, and stop after DefaultMaxAttempts attempts.
const (
	DefaultInitial    = time.Second      // wait before the first retry
	DefaultMultiplier = 2.0              // growth factor per retry
	DefaultMaxDelay   = 32 * time.Second // cap on every wait
	// DefaultJitterMax is the largest maximum of the zero Jitter, which
	// adds uniform 0..min(DefaultJitterMax, Initial) to each wait: the
	// published 0..1000 ms at an Initial of 1 s or more, scaled down with a
	// smaller Initial.
	DefaultJitterMax   = time.Second
	DefaultMaxAttempts = 10 // attempts, including the first
)

// Unlimited, as Policy.MaxAttempts, removes the attempt limit. The loop then
// ends only through MaxElapsed, the context, a non-retryable error, or a
// Budget; set at least one of them. It is an int, so that it cannot be
// given to a field that holds a duration.
const Unlimited int = -1

// Immediate, as Policy.Initial, makes every computed wait zero (Multiplier,
// MaxDelay and Jitter are then ignored). Waits asked for by the server
// through [ServerWait] are still honoured. Meant for tests, benchmarks and
// in-memory operations, not for calls over a network. Given to any other
// field, it makes [Policy.Validate] fail with an error that says so.
const Immediate time.Duration = -1

// ErrInvalidPolicy is wrapped by every error that [Policy.Validate] returns.
var ErrInvalidPolicy = errors.New("retry: invalid policy")

// Policy says how to retry: how long to wait before each retry (Initial,
// Multiplier, MaxDelay, Jitter) and when to stop (MaxAttempts, MaxElapsed,
// Retryable, Budget, the context). The wait rule and the stop rules are
// independent: reaching MaxDelay ends the growth of the waits, not the
// retries.
//
// The zero Policy is the reference behaviour: waits of 1 s, 2 s, 4 s, … up
// to 32 s, each plus a fresh uniform 0..1000 ms and capped at 32 s, for at
// most 10 attempts, retrying every error except those marked [Permanent] and
// context errors.
//
// A Policy is a plain value: copying it copies everything except the
// Budget and Throttle it points to, which are meant to be shared. It holds
// no per-call state, so one Policy may be used by any number of goroutines
// and calls at once.
type Policy struct {
	// Initial is the wait before the first retry. Zero means
	// DefaultInitial (1 s); [Immediate] means no computed waits at all.
	// Other negative values are invalid.
	Initial time.Duration

	// Multiplier is the growth factor of the wait per retry: the wait before
	// retry n (n = 0 for the first) is Initial*Multiplier^n before jitter.
	// Zero means DefaultMultiplier (2); 1 gives constant waits; values
	// below 1 are invalid. DecorrelatedJitter ignores it.
	Multiplier float64

	// MaxDelay caps every wait, after jitter is applied: no wait is ever
	// longer, and once the exponential reaches it, the loop keeps retrying
	// every MaxDelay until a stop rule ends it. Zero means DefaultMaxDelay
	// (32 s). It must not be below Initial.
	MaxDelay time.Duration

	// Jitter randomises each wait. The zero value adds a fresh uniform
	// 0..min(DefaultJitterMax, Initial) to each wait before the cap: with
	// the reference Initial of 1 s (or more) that is the published
	// 0..1000 ms, AdditiveJitter(time.Second); with Initial 10 ms it is
	// 0..10 ms, so the first wait is 10..20 ms. Set AdditiveJitter(max) for
	// a fixed maximum.
	Jitter Jitter

	// MaxAttempts is the total number of attempts, the first included.
	// Zero means DefaultMaxAttempts (10); 1 means no retries; [Unlimited]
	// means no attempt limit. Other negative values are invalid.
	MaxAttempts int

	// MaxElapsed is the total time budget of one Do call, measured from its
	// start. No wait starts that would end at or past it: the loop gives up
	// at once instead. An attempt with an AttemptTimeout is also cut short
	// where the budget ends; one without runs until the operation returns
	// or the context ends (the loop cannot stop an operation that ignores
	// its context). Zero means no time budget (the context may still have
	// a deadline, which is honoured the same way).
	MaxElapsed time.Duration

	// AttemptTimeout bounds each attempt with its own context deadline. An
	// attempt that runs out of it is retried while the caller's context is
	// alive, even though its error is a context error and whatever
	// Retryable says (only Permanent stops it, and the error of an inner
	// retry loop that made more than one attempt, unless RetryExhausted is
	// set: see [IsExhausted]; an inner loop cut short in its first attempt
	// never retried, so retrying it multiplies nothing). The stop rules
	// still apply.
	// Zero means no per-attempt timeout.
	AttemptTimeout time.Duration

	// Retryable reports whether an attempt's error may be retried. Nil means
	// every error is retried except those marked [Permanent], context
	// errors (context.Canceled or context.DeadlineExceeded itself in the
	// error's chain, not a timeout that only matches it through an Is
	// method, such as a dial timeout) that did not come from
	// AttemptTimeout, and errors of inner retry loops that already
	// gave up (see RetryExhausted). Errors marked Permanent are never
	// retried, whatever Retryable says.
	Retryable func(error) bool

	// RetryExhausted lets the loop retry an error that wraps an [*Error]
	// (or otherwise reports [IsExhausted]): one that an inner retry loop
	// already gave up on. By default such an error ends the loop at once,
	// so that nested retry layers do not multiply calls (4 attempts at each
	// of 3 layers would be 64 calls on the bottom one).
	RetryExhausted bool

	// Budget, when set, limits retries to a fraction of recent requests,
	// shared by every Policy and transport that points to it. First
	// attempts are never refused. Nil means no budget.
	Budget *Budget

	// Throttle, when set, rejects attempts locally, before they are sent,
	// when the backend has recently been refusing many of them (adaptive
	// client-side throttling). Nil means no throttling.
	Throttle *Throttle

	// Observer, when set, is told of every attempt, retry, wait, Throttle
	// rejection, Budget refusal and the end of every call (see [Event]),
	// on the goroutine running the loop. Combine several with [Observers];
	// adapt a function with [ObserverFunc]. Nil means none: the loop then
	// makes no such calls and its success path costs nothing extra.
	Observer Observer

	// Logger, when set, logs each retry at Debug level and giving up at
	// Error level, with the attempt count, elapsed time, reason and last
	// error; it is fed the same events as Observer. Nil means no logging,
	// and so does a Logger without a handler (a zero slog.Logger).
	Logger *slog.Logger
}

func (p *Policy) initial() time.Duration {
	if p.Initial == 0 {
		return DefaultInitial
	}
	return p.Initial
}

func (p *Policy) multiplier() float64 {
	if p.Multiplier == 0 {
		return DefaultMultiplier
	}
	return p.Multiplier
}

func (p *Policy) maxDelay() time.Duration {
	if p.MaxDelay == 0 {
		return DefaultMaxDelay
	}
	return p.MaxDelay
}

func (p *Policy) maxAttempts() int {
	if p.MaxAttempts == 0 {
		return DefaultMaxAttempts
	}
	return p.MaxAttempts
}

// jitterMax is the additive jitter's maximum: Jitter.amount, or for the
// zero Jitter min(DefaultJitterMax, Initial).
func (p *Policy) jitterMax() time.Duration {
	if p.Jitter.kind == jitterDefault {
		return p.defaultJitterMax()
	}
	return p.Jitter.amount
}

// defaultJitterMax is the zero Jitter's maximum, min(DefaultJitterMax,
// Initial): exactly the published 1 s at the reference Initial of 1 s (or
// more), and never more than Initial below it.
func (p *Policy) defaultJitterMax() time.Duration {
	return min(DefaultJitterMax, p.initial())
}

// Validate reports the first field of p that makes no sense, in an error
// that names the field and its value and wraps [ErrInvalidPolicy]. Nil means
// the policy is usable. [Do] calls it and returns its error without running
// the operation.
func (p Policy) Validate() error {
	return p.validate()
}

func (p *Policy) validate() error {
	if p.fastValid() {
		return nil
	}
	return p.validateSlow()
}

// fastValid reports, in a few comparisons that the compiler inlines into
// Do, that p has one of the common valid shapes, [Immediate] included (the
// OR of the durations is non-negative only when each of them is). False
// means "check fully", not "invalid".
func (p *Policy) fastValid() bool {
	return p.MaxDelay|p.MaxElapsed|p.AttemptTimeout >= 0 && p.validShape()
}

// validShape is fastValid without its check of the durations' signs.
func (p *Policy) validShape() bool {
	return p.MaxAttempts >= Unlimited &&
		p.Jitter.kind <= jitterDecorrelated && (p.Multiplier == 0 || p.Multiplier >= 1) &&
		(p.Initial == 0 && (p.MaxDelay == 0 || p.MaxDelay >= DefaultInitial) ||
			p.Initial > 0 && (p.Initial <= p.MaxDelay || p.MaxDelay == 0 && p.Initial <= DefaultMaxDelay) ||
			p.Initial == Immediate)
}

// validateSlow checks every field of p, one by one.
func (p *Policy) validateSlow() error {
	switch {
	case p.Initial < 0 && p.Initial != Immediate:
		return fmt.Errorf("%w: Initial %v is negative", ErrInvalidPolicy, p.Initial)
	case p.MaxDelay < 0:
		return negativeField("MaxDelay", p.MaxDelay)
	case p.MaxElapsed < 0:
		return negativeField("MaxElapsed", p.MaxElapsed)
	case p.AttemptTimeout < 0:
		return negativeField("AttemptTimeout", p.AttemptTimeout)
	case p.MaxAttempts < Unlimited:
		return fmt.Errorf("%w: MaxAttempts %d is negative (use retry.Unlimited for no limit)", ErrInvalidPolicy, p.MaxAttempts)
	case p.Multiplier != 0 && !(p.Multiplier >= 1):
		return fmt.Errorf("%w: Multiplier %v is below 1 (or not a number)", ErrInvalidPolicy, p.Multiplier)
	case p.Initial != Immediate && p.initial() > p.maxDelay():
		return fmt.Errorf("%w: MaxDelay %v is below Initial %v", ErrInvalidPolicy, p.maxDelay(), p.initial())
	}
	return p.Jitter.validate()
}

// negativeField is the error of a duration field other than Initial that is
// negative, naming [Immediate] when that is what it holds.
func negativeField(name string, d time.Duration) error {
	if d == Immediate {
		return fmt.Errorf("%w: %s is retry.Immediate, which only Initial takes", ErrInvalidPolicy, name)
	}
	return fmt.Errorf("%w: %s %v is negative", ErrInvalidPolicy, name, d)
}

// AWSStandardPolicy returns the AWS SDKs' "standard" retry mode: 3 attempts in
// all, full jitter on an exponential from 50 ms, capped at 20 s before
// jitter (the SDKs' figures since November 2026; throttling errors use a
// 1 s base there, which one Policy does not distinguish). Pair it with a
// [Budget] such as [AWSBudget] to get the SDKs' retry quota.
func AWSStandardPolicy() Policy {
	return Policy{
		Initial:     50 * time.Millisecond,
		Multiplier:  2,
		MaxDelay:    20 * time.Second,
		Jitter:      FullJitter(),
		MaxAttempts: 3,
	}
}

// GRPCConnectPolicy returns gRPC's connection backoff (gRPC's
// connection-backoff.md): 1 s initial wait, ×1.6 per retry, ±20% jitter,
// 120 s cap. gRPC reconnects without an attempt limit; this preset keeps the
// default limit of 10 attempts: set MaxAttempts to [Unlimited] to match it.
// Unlike gRPC, jittered waits never exceed the cap.
func GRPCConnectPolicy() Policy {
	return Policy{
		Initial:    time.Second,
		Multiplier: 1.6,
		MaxDelay:   120 * time.Second,
		Jitter:     ProportionalJitter(0.2),
	}
}
