package retryvalkey

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retrykit/retry"
	"github.com/valkey-io/valkey-go"
)

// NewClient returns a valkey-go client, built from opt, whose one retry
// layer follows p:
//   - valkey-go's own retry loop (for commands it may repeat: read-only
//     ones and those marked ToRetryable) waits as p says, through
//     opt.RetryDelay, and stops at p.MaxAttempts, p.MaxElapsed (as a
//     deadline on the call's context), a p.Budget refusal, a p.Throttle
//     rejection, or an error p.Retryable rejects;
//   - the idempotent writes listed in the package documentation, and every
//     command sent with a context from MarkSafe, are marked ToRetryable so
//     that valkey-go's loop may repeat them too;
//   - a command valkey-go may not repeat is retried by the returned client
//     itself, with p, only when it was not sent (a dial error);
//   - a command that failed without a reply comes back with an error
//     matching ErrNotSent or ErrMaybeApplied.
//
// It refuses, with an error naming the field, an opt with DisableRetry
// (valkey-go's loop is the one layer) or its own RetryDelay, and a p that
// is invalid, has an AttemptTimeout (valkey-go's loop runs every attempt
// with the call's context, so a per-attempt timeout cannot be applied) or
// DecorrelatedJitter (valkey-go does not tell RetryDelay the previous
// wait).
func NewClient(opt valkey.ClientOption, p retry.Policy) (valkey.Client, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	switch {
	case p.AttemptTimeout != 0:
		return nil, fmt.Errorf("retryvalkey: Policy.AttemptTimeout %v: valkey-go runs every attempt with the call's context; bound attempts with ClientOption.ConnWriteTimeout or the context", p.AttemptTimeout)
	case p.Jitter == retry.DecorrelatedJitter:
		return nil, errors.New("retryvalkey: Policy.Jitter DecorrelatedJitter: valkey-go does not pass the previous wait to RetryDelay")
	case opt.DisableRetry:
		return nil, errors.New("retryvalkey: ClientOption.DisableRetry is set: valkey-go's retry loop is the one retrykit drives")
	case opt.RetryDelay != nil:
		return nil, errors.New("retryvalkey: ClientOption.RetryDelay is already set: NewClient sets it from the policy")
	}
	r := &retryer{p: p}
	opt.RetryDelay = r.delay
	c, err := valkey.NewClient(opt)
	if err != nil {
		return nil, err
	}
	return &client{Client: c, r: r}, nil
}

// retryer is valkey-go's RetryDelay built from a Policy. valkey-go calls it
// after every failed attempt it may retry, with the attempts made so far,
// on the goroutine of the call; it gets no context, so it holds no state
// per call: the attempt number valkey-go passes is the retry number.
type retryer struct {
	p retry.Policy
}

// maxAttempts returns the policy's attempt limit, 0 for none.
func (r *retryer) maxAttempts() int {
	switch n := r.p.MaxAttempts; {
	case n == retry.Unlimited:
		return 0
	case n == 0:
		return retry.DefaultMaxAttempts
	default:
		return n
	}
}

// accepted is the default rule of retry.ThrottleConfig.Accepted.
func accepted(err error) bool {
	var o interface{ Overloaded() bool }
	if errors.As(err, &o) && o.Overloaded() {
		return false
	}
	return !errors.Is(err, context.DeadlineExceeded)
}

func (r *retryer) observe(e retry.Event) {
	if r.p.Observer != nil {
		r.p.Observer.Observe(context.Background(), e)
	}
}

// delay is the RetryDelayFn: attempts is the number of attempts made, the
// failed one included. It returns the wait before the next attempt, or -1
// to stop.
func (r *retryer) delay(attempts int, cmd valkey.Completed, err error) time.Duration {
	p := &r.p
	if p.Throttle != nil {
		p.Throttle.Record(accepted(err))
	}
	if retry.IsPermanent(err) || (p.Retryable != nil && !p.Retryable(err)) {
		return -1
	}
	if m := r.maxAttempts(); m > 0 && attempts >= m {
		return -1
	}
	d := p.Delay(attempts-1, 0, nil)
	if p.Budget != nil && !p.Budget.AllowRetry() {
		r.observe(retry.Event{Kind: retry.EventBudgetRefused, Attempt: attempts, MaxAttempts: p.MaxAttempts, Err: err})
		return -1
	}
	if p.Throttle != nil && !p.Throttle.Allow() {
		r.observe(retry.Event{Kind: retry.EventThrottled, Attempt: attempts + 1, MaxAttempts: p.MaxAttempts, Err: retry.ErrThrottled})
		return -1
	}
	r.observe(retry.Event{Kind: retry.EventRetry, Attempt: attempts, MaxAttempts: p.MaxAttempts, Err: err, Delay: d})
	r.observe(retry.Event{Kind: retry.EventAttempt, Attempt: attempts + 1, MaxAttempts: p.MaxAttempts})
	return d
}

// client wraps a valkey-go client: it marks safe commands retryable,
// accounts first attempts, retries unsent unsafe commands and wraps the
// errors of failed commands.
type client struct {
	valkey.Client
	r *retryer
}

// safe reports whether cmd may be repeated after it was written.
func safe(ctx context.Context, cmd *valkey.Completed) bool {
	if cmd.IsRetryable() {
		return true
	}
	w := cmd.Commands()
	return markedSafe(ctx) || idempotent(w)
}

func name(cmd *valkey.Completed) string {
	if w := cmd.Commands(); len(w) > 0 {
		return w[0]
	}
	return ""
}

// valkeyRetries reports whether valkey-go's loop called RetryDelay for the
// final error err of a retryable command (client.go's isRetryable).
func valkeyRetries(ctx context.Context, err error) bool {
	if err == nil || valkey.IsValkeyNil(err) || ctx.Err() != nil {
		return false
	}
	if ve, ok := valkey.IsValkeyErr(err); ok {
		return ve.IsLoading()
	}
	return true
}

// withElapsed bounds ctx by p.MaxElapsed, so that valkey-go's loop starts
// no wait that would end past it.
func (c *client) withElapsed(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.r.p.MaxElapsed <= 0 {
		return ctx, nil
	}
	return context.WithTimeout(ctx, c.r.p.MaxElapsed)
}

// first accounts a first attempt; false means the Throttle rejected it.
func (c *client) first(ctx context.Context) bool {
	p := &c.r.p
	if p.Budget != nil {
		p.Budget.RecordAttempt()
	}
	if p.Throttle != nil && !p.Throttle.Allow() {
		if p.Observer != nil {
			p.Observer.Observe(ctx, retry.Event{Kind: retry.EventThrottled, Attempt: 1, MaxAttempts: p.MaxAttempts, Err: retry.ErrThrottled})
		}
		return false
	}
	if p.Observer != nil {
		p.Observer.Observe(ctx, retry.Event{Kind: retry.EventAttempt, Attempt: 1, MaxAttempts: p.MaxAttempts})
	}
	return true
}

// last accounts the end of a call whose final error is err; recorded says
// whether RetryDelay already counted that attempt's outcome.
func (c *client) last(ctx context.Context, err error, recorded bool) {
	p := &c.r.p
	if p.Throttle != nil && !recorded {
		p.Throttle.Record(err == nil || valkey.IsValkeyNil(err) || accepted(err))
	}
	if p.Observer != nil {
		e := retry.Event{Kind: retry.EventDone, MaxAttempts: p.MaxAttempts}
		if err != nil && !valkey.IsValkeyNil(err) {
			e.Err = err
		}
		p.Observer.Observe(ctx, e)
	}
}

// wrap returns resp, with an error that is not a server reply wrapped in a
// *CommandError.
func wrap(resp valkey.ValkeyResult, cmdName string) valkey.ValkeyResult {
	err := resp.NonValkeyError()
	if err == nil {
		return resp
	}
	o := classify(err)
	if o == outcomeFinal {
		o = outcomeNotSent
	}
	return valkey.NewErrorResult(&CommandError{Command: cmdName, Err: err, outcome: o})
}

// Do sends one command (see NewClient for how it is retried).
func (c *client) Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult {
	if !cmd.IsRetryable() {
		if !safe(ctx, &cmd) {
			return c.doUnsafe(ctx, cmd, name(&cmd))
		}
		cmd = cmd.ToRetryable()
	}
	// The name is read before Do: valkey-go recycles the command once the
	// server has answered it, and another goroutine may then reuse it.
	n := name(&cmd)
	p := &c.r.p
	if p.Budget == nil && p.Throttle == nil && p.Observer == nil && p.MaxElapsed <= 0 {
		// Nothing to account: valkey-go's loop and RetryDelay do it all.
		resp := c.Client.Do(ctx, cmd)
		if resp.NonValkeyError() == nil {
			return resp
		}
		return wrap(resp, n)
	}
	if !c.first(ctx) {
		return valkey.NewErrorResult(retry.ErrThrottled)
	}
	ctx2, cancel := c.withElapsed(ctx)
	resp := c.Client.Do(ctx2, cmd)
	if cancel != nil {
		cancel()
	}
	err := resp.Error()
	c.last(ctx, err, valkeyRetries(ctx2, err))
	if err == nil {
		return resp
	}
	return wrap(resp, n)
}

// doUnsafe sends a command that valkey-go does not retry through retry.Do
// with the policy (its Budget, Throttle and Observer included), and
// retries it only while it was not sent. valkey-go keeps (does not
// recycle) a command that failed without a reply, so it may be sent again.
func (c *client) doUnsafe(ctx context.Context, cmd valkey.Completed, n string) valkey.ValkeyResult {
	var resp valkey.ValkeyResult
	sent := false
	err := retry.Do(ctx, c.r.p, func(ctx context.Context) error {
		resp, sent = c.Client.Do(ctx, cmd), true
		err := resp.NonValkeyError()
		if err == nil {
			return nil
		}
		ce := &CommandError{Command: n, Err: err, outcome: classify(err)}
		if ce.outcome == outcomeNotSent {
			return ce
		}
		if ce.outcome == outcomeFinal {
			ce.outcome = outcomeNotSent
		}
		return retry.Permanent(ce)
	})
	if err == nil {
		return resp
	}
	if !sent { // the context ended first, or the Throttle rejected every attempt
		return valkey.NewErrorResult(err)
	}
	var re *retry.Error
	if errors.As(err, &re) && re.Attempts == 1 && re.Reason == retry.ReasonPermanent {
		return valkey.NewErrorResult(errors.Unwrap(re.Err))
	}
	return valkey.NewErrorResult(err)
}

// DoMulti sends commands in one pipeline (or a MULTI ... EXEC block). It is
// repeated by valkey-go's loop, as a whole, only when every command in it
// (MULTI and EXEC aside) is safe to repeat; DoMulti then marks the
// commands in multi ToRetryable (it sets that flag in the caller's slice).
// A pipeline that is not safe is sent once.
func (c *client) DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult {
	if len(multi) == 0 {
		return c.Client.DoMulti(ctx, multi...)
	}
	all := true
	for i := range multi {
		if !multi[i].IsRetryable() && !txWord(&multi[i]) && !safe(ctx, &multi[i]) {
			all = false
			break
		}
	}
	if all {
		for i := range multi {
			if !multi[i].IsRetryable() {
				multi[i] = multi[i].ToRetryable()
			}
		}
	}
	if !c.first(ctx) {
		out := make([]valkey.ValkeyResult, len(multi))
		for i := range out {
			out[i] = valkey.NewErrorResult(retry.ErrThrottled)
		}
		return out
	}
	// Names are read before DoMulti, which recycles the commands answered.
	var buf [8]string
	names := buf[:0]
	if len(multi) > len(buf) {
		names = make([]string, 0, len(multi))
	}
	for i := range multi {
		names = append(names, name(&multi[i]))
	}
	ctx2, cancel := c.withElapsed(ctx)
	resps := c.Client.DoMulti(ctx2, multi...)
	if cancel != nil {
		cancel()
	}
	var final error
	recorded := false
	for i := range resps {
		if err := resps[i].Error(); err != nil && !valkey.IsValkeyNil(err) {
			if final == nil {
				final = err
			}
			if all && valkeyRetries(ctx2, err) {
				recorded = true
			}
		}
	}
	c.last(ctx, final, recorded)
	for i := range resps {
		resps[i] = wrap(resps[i], names[i])
	}
	return resps
}

func txWord(cmd *valkey.Completed) bool {
	switch name(cmd) {
	case "MULTI", "EXEC", "multi", "exec":
		return true
	}
	return false
}

// DoCache sends a cacheable (read-only) command, which valkey-go's loop
// repeats as the policy says.
func (c *client) DoCache(ctx context.Context, cmd valkey.Cacheable, ttl time.Duration) valkey.ValkeyResult {
	if !c.first(ctx) {
		return valkey.NewErrorResult(retry.ErrThrottled)
	}
	var n string // read before DoCache, which recycles the command answered
	if w := cmd.Commands(); len(w) > 0 {
		n = w[0]
	}
	ctx2, cancel := c.withElapsed(ctx)
	resp := c.Client.DoCache(ctx2, cmd, ttl)
	if cancel != nil {
		cancel()
	}
	err := resp.Error()
	c.last(ctx, err, valkeyRetries(ctx2, err))
	return wrap(resp, n)
}
