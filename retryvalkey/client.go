package retryvalkey

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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
//   - every call runs through retry.Do with p, which sends a command
//     again, rebuilt from its words, when the server refused it without
//     running it (BUSY, READONLY, MASTERDOWN, ...; any command) or when it
//     was not sent (a dial error);
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
	return &client{Client: c, r: r, cluster: c.Mode() == valkey.ClientModeCluster}, nil
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
		r.observe(retry.Event{Kind: retry.EventBudgetRefused, Attempt: attempts, MaxAttempts: p.MaxAttempts, Err: err})
		return -1
	}
	if p.Throttle != nil {
		if !p.Throttle.Allow() {
			r.observe(retry.Event{Kind: retry.EventThrottled, Attempt: attempts + 1, MaxAttempts: p.MaxAttempts, Err: retry.ErrThrottled})
			return -1
		}
		p.Throttle.Record(accepted(err))
	}
	r.observe(retry.Event{Kind: retry.EventRetry, Attempt: attempts, MaxAttempts: p.MaxAttempts, Err: err, Delay: d})
	r.observe(retry.Event{Kind: retry.EventAttempt, Attempt: attempts + 1, MaxAttempts: p.MaxAttempts})
	return d
}

// client wraps a valkey-go client: it marks safe commands retryable, runs
// each call through retry.Do with the policy (which accounts its attempts,
// Budget, Throttle and Observer), sends again what the server refused and
// what was not sent, and wraps the errors of commands that failed without
// a reply.
type client struct {
	valkey.Client
	r       *retryer
	cluster bool // valkey-go's cluster loop also repeats TRYAGAIN and CLUSTERDOWN
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

// withElapsed bounds ctx by p.MaxElapsed, so that valkey-go's loop starts
// no wait that would end past it.
func (c *client) withElapsed(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.r.p.MaxElapsed <= 0 {
		return ctx, nil
	}
	return context.WithTimeout(ctx, c.r.p.MaxElapsed)
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

// innerRetries reports whether valkey-go's own loop repeats a retryable
// command answered with the refusal err (then RetryDelay decided, and the
// refusal must not be repeated a second time).
func (c *client) innerRetries(err error) bool {
	ve, ok := valkey.IsValkeyErr(err)
	if !ok {
		return false
	}
	if ve.IsLoading() {
		return true
	}
	return c.cluster && (ve.IsTryAgain() || ve.IsClusterDown())
}

// Do sends one command (see NewClient for how it is retried).
func (c *client) Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult {
	safe := cmd.IsRetryable() || safe(ctx, &cmd)
	if safe && !cmd.IsRetryable() {
		cmd = cmd.ToRetryable()
	}
	// The words are kept before Do: valkey-go recycles the command once the
	// server has answered it, and another goroutine may then reuse it.
	k := keep(&cmd)
	defer k.release()
	return c.send(ctx, k, safe, func(ctx context.Context, resend bool) valkey.ValkeyResult {
		if !resend {
			return c.Client.Do(ctx, cmd)
		}
		return c.Client.Do(ctx, k.build(c.Client.B()))
	})
}

// DoCache sends a cacheable (read-only) command, which valkey-go's loop
// repeats as the policy says. A resend after a refusal goes through Do: it
// is answered by the server, not the cache.
func (c *client) DoCache(ctx context.Context, cmd valkey.Cacheable, ttl time.Duration) valkey.ValkeyResult {
	k := keep((*valkey.Completed)(&cmd))
	defer k.release()
	return c.send(ctx, k, true, func(ctx context.Context, resend bool) valkey.ValkeyResult {
		if !resend {
			return c.Client.DoCache(ctx, cmd, ttl)
		}
		return c.Client.Do(ctx, k.build(c.Client.B()))
	})
}

// send runs one command through retry.Do with the policy. The first send
// goes through valkey-go's loop, which repeats a retryable command after
// lost replies and LOADING as RetryDelay says; a refusal that loop does not
// repeat (BUSY, MASTERDOWN, READONLY, ...), and a command that was not
// sent, are sent again, rebuilt from k, as retry.Do says. Those resends
// are not retryable in valkey-go's loop: this loop alone repeats them, a
// lost reply only when safe.
func (c *client) send(ctx context.Context, k *kept, safe bool, do func(ctx context.Context, resend bool) valkey.ValkeyResult) valkey.ValkeyResult {
	var resp valkey.ValkeyResult
	sent := 0
	err := retry.Do(ctx, c.r.p, func(ctx context.Context) error {
		sent++
		if sent == 1 {
			ctx2, cancel := c.withElapsed(ctx)
			resp = do(ctx2, false)
			if cancel != nil {
				cancel()
			}
		} else {
			resp = do(ctx, true)
		}
		err := resp.Error()
		if err == nil || valkey.IsValkeyNil(err) {
			return nil
		}
		// The first send of a retryable command went through valkey-go's
		// loop, which already repeated what it could as the policy says.
		inner := sent == 1 && k.cmd.IsRetryable()
		switch o := classify(err); o {
		case outcomeRefused:
			if (inner && c.innerRetries(err)) || !k.resendable() {
				return retry.Permanent(err)
			}
			return err
		case outcomeReply:
			return retry.Permanent(err)
		default:
			ce := &CommandError{Command: k.name(), Err: err, outcome: o}
			if o == outcomeFinal { // the client is closed
				ce.outcome = outcomeNotSent
				return retry.Permanent(ce)
			}
			if inner || !k.resendable() || (o == outcomeMaybeApplied && !safe) {
				return retry.Permanent(ce)
			}
			return ce
		}
	})
	if err == nil {
		return resp
	}
	if sent == 0 { // the context ended first, or the Throttle rejected every attempt
		return valkey.NewErrorResult(err)
	}
	if _, ok := valkey.IsValkeyErr(resp.Error()); ok {
		// A reply is returned as valkey-go returns it (the last one).
		return resp
	}
	var re *retry.Error
	if errors.As(err, &re) && re.Attempts == 1 && re.Reason == retry.ReasonPermanent {
		return valkey.NewErrorResult(errors.Unwrap(re.Err))
	}
	return valkey.NewErrorResult(err)
}

// kept holds what it takes to send a command again after valkey-go has
// recycled it (it does once the server answered): its words, flags and
// slot. It is pooled, so that keeping costs the success path no
// allocation.
type kept struct {
	words []string
	cmd   valkey.Completed // flags and slot; its words are valkey-go's
}

var keptPool = sync.Pool{New: func() any { return new(kept) }}

func keep(cmd *valkey.Completed) *kept {
	k := keptPool.Get().(*kept)
	k.words = append(k.words[:0], cmd.Commands()...)
	k.cmd = *cmd
	return k
}

func (k *kept) release() {
	clear(k.words)
	k.words = k.words[:0]
	k.cmd = valkey.Completed{}
	if cap(k.words) <= 1024 {
		keptPool.Put(k)
	}
}

func (k *kept) name() string {
	if len(k.words) > 0 {
		return k.words[0]
	}
	return ""
}

// Key-slot flags of valkey-go's commands (its cmds.InitSlot and
// cmds.NoSlot): a command with neither has the slot of a key.
const (
	initSlot = 1 << 14
	noSlot   = 1 << 15
)

// resendable reports whether build can make the command again: valkey-go's
// builder refuses an empty name and subscriptions, and a cluster command's
// slot must be that of one of its words.
func (k *kept) resendable() bool {
	if k.name() == "" || strings.HasSuffix(strings.ToUpper(k.name()), "SUBSCRIBE") {
		return false
	}
	_, ok := k.keyIndex()
	return ok
}

// keyIndex returns the index of a word whose slot is the command's, 0 when
// the command has no key slot, and false when no word has it.
func (k *kept) keyIndex() (int, bool) {
	ks := k.cmd.Slot()
	if ks&(initSlot|noSlot) != 0 {
		return 0, true
	}
	for i := 1; i < len(k.words); i++ {
		if c := k.cmd.SetSlot(k.words[i]); c.Slot() == ks {
			return i, true
		}
	}
	return 0, false
}

// build makes the command again from its words, with b (the client's
// builder), blocking if it was, routed to the same slot, and not
// retryable: valkey-go's loop does not repeat it. It must be resendable.
func (k *kept) build(b valkey.Builder) valkey.Completed {
	var c valkey.Completed
	if k.cmd.IsBlock() {
		c = b.Arbitrary(k.words...).Blocking()
	} else {
		c = b.Arbitrary(k.words...).Build()
	}
	if i, _ := k.keyIndex(); i > 0 {
		c = c.SetSlot(k.words[i])
	}
	return c
}

// DoMulti sends commands in one pipeline (or a MULTI ... EXEC block). It is
// repeated by valkey-go's loop, as a whole, only when every command in it
// (MULTI and EXEC aside) is safe to repeat; DoMulti then marks the
// commands in multi ToRetryable (it sets that flag in the caller's slice).
// In a pipeline without MULTI, the commands the server refused (BUSY,
// READONLY, ...) or that were not sent are sent again, as a smaller
// pipeline, as the policy says; a command whose reply was lost is among
// them only when every command is safe. A MULTI ... EXEC block is sent
// again only by valkey-go's loop.
func (c *client) DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult {
	if len(multi) == 0 {
		return c.Client.DoMulti(ctx, multi...)
	}
	all, tx := true, false
	for i := range multi {
		if txWord(&multi[i]) {
			tx = true
		} else if !multi[i].IsRetryable() && !safe(ctx, &multi[i]) {
			all = false
		}
	}
	if all {
		for i := range multi {
			if !multi[i].IsRetryable() {
				multi[i] = multi[i].ToRetryable()
			}
		}
	}
	// The words are kept before DoMulti, which recycles the commands answered.
	var buf [8]*kept
	ks := buf[:0]
	for i := range multi {
		ks = append(ks, keep(&multi[i]))
	}
	defer func() {
		for _, k := range ks {
			k.release()
		}
	}()
	var (
		resps   []valkey.ValkeyResult
		pending []int // indices of the commands to send again
		sent    int
	)
	err := retry.Do(ctx, c.r.p, func(ctx context.Context) error {
		sent++
		if sent == 1 {
			ctx2, cancel := c.withElapsed(ctx)
			resps = c.Client.DoMulti(ctx2, multi...)
			if cancel != nil {
				cancel()
			}
			for i := range resps {
				pending = append(pending, i)
			}
		} else {
			again := make([]valkey.Completed, len(pending))
			for j, i := range pending {
				again[j] = ks[i].build(c.Client.B())
			}
			for j, r := range c.Client.DoMulti(ctx, again...) {
				resps[pending[j]] = r
			}
		}
		var failed error // the first error that ends this call
		next := pending[:0]
		for _, i := range pending {
			err := resps[i].Error()
			if err == nil || valkey.IsValkeyNil(err) {
				continue
			}
			inner := sent == 1 && all
			o := classify(err)
			resend := !tx && ks[i].resendable()
			switch o {
			case outcomeRefused:
				resend = resend && !(inner && c.innerRetries(err))
			case outcomeNotSent:
				resend = resend && !inner
			case outcomeMaybeApplied:
				resend = resend && !inner && all
			default:
				resend = false
			}
			if resend {
				next = append(next, i)
			} else if failed == nil {
				failed = err
			}
		}
		pending = next
		switch {
		case len(pending) > 0:
			return resps[pending[0]].Error()
		case failed != nil:
			return retry.Permanent(failed)
		}
		return nil
	})
	if sent == 0 { // the context ended first, or the Throttle rejected every attempt
		out := make([]valkey.ValkeyResult, len(multi))
		for i := range out {
			out[i] = valkey.NewErrorResult(err)
		}
		return out
	}
	for i := range resps {
		resps[i] = wrap(resps[i], ks[i].name())
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
