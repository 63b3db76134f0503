package retryvalkey

import (
	"context"
	"errors"
	"time"

	"github.com/retrykit/retry"
	"github.com/valkey-io/valkey-go"
)

// retryer is valkey-go's RetryDelay built from a Policy. valkey-go calls it
// after every failed attempt it may retry, with the attempts made so far,
// on the goroutine of the call; it gets no context, so it holds no state
// per call: the attempt number valkey-go passes is the retry number.
type retryer struct {
	p retry.Policy
}

// maxAttempts returns the policy's attempt limit, 0 for none.
func (r *retryer) maxAttempts() int {
	if n := r.limit(); n != retry.Unlimited {
		return n
	}
	return 0
}

// limit returns the policy's attempt limit as retry.Do reports it in
// Event.MaxAttempts: the default for zero, Unlimited as it is.
func (r *retryer) limit() int {
	if r.p.MaxAttempts == 0 {
		return retry.DefaultMaxAttempts
	}
	return r.p.MaxAttempts
}

// accepted is the default rule of retry.ThrottleConfig.Accepted.
func accepted(err error) bool {
	var o interface{ Overloaded() bool }
	if errors.As(err, &o) && o.Overloaded() {
		return false
	}
	return !errors.Is(err, context.DeadlineExceeded)
}

// observe tells the policy's Observer e, with MaxAttempts as retry.Do
// reports it (the default for zero, Unlimited as it is).
func (r *retryer) observe(e retry.Event) {
	if r.p.Observer != nil {
		e.MaxAttempts = r.limit()
		r.p.Observer.Observe(context.Background(), e)
	}
}

// delay is the RetryDelayFn: attempts is the number of attempts made, the
// failed one included. It returns the wait before the next attempt, or -1
// to stop.
//
// The failed attempt is counted by the Throttle here only when the loop
// goes on: when it stops, the call ends with that attempt's error, which
// the client's own loop (retry.Do) counts. The Throttle's decision on the
// next attempt is therefore taken before the failure is counted.
func (r *retryer) delay(attempts int, cmd valkey.Completed, err error) time.Duration {
	p := &r.p
	if retry.IsPermanent(err) || (p.Retryable != nil && !p.Retryable(err)) {
		return -1
	}
	if m := r.maxAttempts(); m > 0 && attempts >= m {
		return -1
	}
	d := p.Delay(attempts-1, 0, nil)
	if p.Budget != nil && !p.Budget.AllowRetry() {
		r.observe(retry.Event{Kind: retry.EventBudgetRefused, Attempt: attempts, Err: err})
		return -1
	}
	if p.Throttle != nil {
		if !p.Throttle.Allow() {
			r.observe(retry.Event{Kind: retry.EventThrottled, Attempt: attempts + 1, Err: retry.ErrThrottled})
			return -1
		}
		p.Throttle.Record(accepted(err))
	}
	r.observe(retry.Event{Kind: retry.EventRetry, Attempt: attempts, Err: err, Delay: d})
	r.observe(retry.Event{Kind: retry.EventAttempt, Attempt: attempts + 1})
	return d
}
