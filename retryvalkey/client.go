package retryvalkey

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
	"github.com/valkey-io/valkey-go"

	"github.com/retrykit/retry/internal/rediscmd"
)

// NewClient returns a valkey-go client, built from opt, whose one retry
// layer follows p, through a retry.Loop per call of Do, DoCache, DoMulti,
// DoMultiCache and Receive, also on its dedicated clients and the clients
// of its Nodes (see the package documentation for each):
//   - valkey-go's own retry loop (for commands it may repeat: read-only
//     ones and those marked ToRetryable) waits and stops as the call's
//     Loop says, through opt.RetryDelay;
//   - the idempotent writes listed in the package documentation, the
//     commands named by WithIdempotent (opts; none by default), and every
//     command sent with a context from MarkSafe, are marked ToRetryable so
//     that valkey-go's loop may repeat them too;
//   - the same Loop sends a command again, rebuilt from its words, when
//     the server refused it without running it (BUSY, READONLY,
//     MASTERDOWN, ...; any command) or when it was not sent (a dial
//     error);
//   - a command that failed without a reply comes back with an error
//     matching retry.ErrNotSent or retry.ErrMaybeApplied.
//
// It refuses, with an error naming the field, an opt with DisableRetry
// (valkey-go's loop is the one layer) or its own RetryDelay, and a p that
// is invalid or has an AttemptTimeout (valkey-go's loop runs every attempt
// with the call's context, so a per-attempt timeout cannot be applied).
//
// ctx bounds the one COMMAND call that reads the server's command table
// (at most opt.Dialer.Timeout, 5 s without one); when it fails, a built-in
// table of read-only commands is used. valkey-go's own dial, in
// valkey.NewClient, takes no context.
func NewClient(ctx context.Context, opt valkey.ClientOption, p retry.Policy, opts ...Option) (valkey.Client, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("retryvalkey: NewClient: %w", err)
	}
	switch {
	case p.AttemptTimeout != 0:
		return nil, fmt.Errorf("retryvalkey: NewClient: Policy.AttemptTimeout %v: valkey-go runs every attempt with the call's context; bound attempts with ClientOption.ConnWriteTimeout or the context", p.AttemptTimeout)
	case opt.DisableRetry:
		return nil, errors.New("retryvalkey: NewClient: ClientOption.DisableRetry is set: valkey-go's retry loop is the one retrykit drives")
	case opt.RetryDelay != nil:
		return nil, errors.New("retryvalkey: NewClient: ClientOption.RetryDelay is already set: NewClient sets it from the policy")
	}
	cfg := rediscmd.Collect(opts)
	r := &retryer{p: p}
	opt.RetryDelay = r.delay
	c, err := valkey.NewClient(opt)
	if err != nil {
		return nil, err
	}
	return &client{Client: c, r: r, cluster: c.Mode() == valkey.ClientModeCluster,
		readOnly: commandTable(ctx, c, opt), idempotent: cfg, closed: new(atomic.Bool)}, nil
}

// commandTable reads the server's command table (COMMAND) once, and
// returns which commands it flags read-only, by lower-case name; nil when
// it cannot be read (then rediscmd's built-in table is used).
func commandTable(ctx context.Context, c valkey.Client, opt valkey.ClientOption) map[string]bool {
	timeout := opt.Dialer.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	infos, err := c.Do(ctx, c.B().Command().Build()).ToArray()
	if err != nil || len(infos) == 0 {
		return nil
	}
	ro := make(map[string]bool, len(infos))
	for _, info := range infos {
		fields, err := info.ToArray()
		if err != nil || len(fields) < 3 {
			continue
		}
		name, err := fields[0].ToString()
		if err != nil {
			continue
		}
		flags, _ := fields[2].AsStrSlice()
		ro[strings.ToLower(name)] = slices.Contains(flags, "readonly")
	}
	return ro
}

// client wraps a valkey-go client: it marks safe commands retryable, runs
// each call on a retry.Loop of the policy (which accounts its attempts,
// Budget, Throttle and Observer, valkey-go's repeats included), sends
// again what the server refused and what was not sent, and wraps the
// errors of commands that failed without a reply.
type client struct {
	valkey.Client
	r          *retryer
	cluster    bool            // valkey-go's cluster loop also repeats TRYAGAIN and CLUSTERDOWN
	readOnly   map[string]bool // the server's command table, read once; nil: the built-in one
	idempotent rediscmd.Config // WithIdempotent's names
	closed     *atomic.Bool    // Close has returned: every later send fails with ErrClosing unsent; shared with Nodes' clients
}

// Close closes the client as valkey-go's Close does (waiting for the calls
// in flight), and remembers that it did: a call made afterwards fails with
// an error matching retry.ErrNotSent, while a call in flight during Close that
// fails with valkey-go's ErrClosing may have been applied (valkey-go
// answers ErrClosing to commands it had already written).
func (c *client) Close() {
	c.Client.Close()
	c.closed.Store(true)
}

// final is the outcome of a send that failed with ErrClosing, given
// whether the client had been closed before the call began.
func final(closedBefore bool) rediscmd.Outcome {
	if closedBefore {
		return rediscmd.OutcomeNotSent
	}
	return rediscmd.OutcomeMaybeApplied
}

// safe reports whether cmd may be repeated after it was written: valkey-go
// knows it read-only, or the caller marked it so, or it is an idempotent
// write (or one WithIdempotent names), or the server's command table (or the built-in one) flags it
// read-only, which matters for commands built with Arbitrary.
func (c *client) safe(ctx context.Context, cmd *valkey.Completed) bool {
	if cmd.IsRetryable() {
		return true
	}
	w := cmd.Commands()
	return safeMark.Marked(ctx) || idempotent(w) || len(w) > 0 && (rediscmd.ReadOnly(c.readOnly, w[0]) || c.idempotent.Declared(w[0]))
}

func name(cmd *valkey.Completed) string {
	if w := cmd.Commands(); len(w) > 0 {
		return w[0]
	}
	return ""
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
	return c.do(ctx, c.Client, cmd)
}

// do is Do through to: the client's valkey-go client, or one of its
// dedicated clients.
func (c *client) do(ctx context.Context, to valkey.CoreClient, cmd valkey.Completed) valkey.ValkeyResult {
	safe := c.safe(ctx, &cmd)
	if safe && !cmd.IsRetryable() {
		cmd = cmd.ToRetryable()
	}
	// The words are kept before Do: valkey-go recycles the command once the
	// server has answered it, and another goroutine may then reuse it.
	k := keep(&cmd)
	defer k.release()
	return c.send(ctx, k, safe, func(ctx context.Context, resend bool) valkey.ValkeyResult {
		if !resend {
			return to.Do(ctx, cmd)
		}
		return to.Do(ctx, k.build(to.B()))
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

// send runs one command on a retry.Loop of the policy. The first send
// goes through valkey-go's loop, which repeats a retryable command after
// lost replies and LOADING as the same Loop says (see retryer.delay); a
// refusal that loop does not repeat (BUSY, MASTERDOWN, READONLY, ...), and
// a command that was not sent, are sent again, rebuilt from k, as the Loop
// says. Those resends are not retryable in valkey-go's loop: this loop
// alone repeats them, a lost reply only when safe.
func (c *client) send(ctx context.Context, k *kept, safe bool, do func(ctx context.Context, resend bool) valkey.ValkeyResult) valkey.ValkeyResult {
	var (
		resp  valkey.ValkeyResult
		last  *CommandError // the failure without a reply of the last send, if any
		sent  int
		maybe bool // a send lost its reply: the command may have been applied
	)
	closedBefore := c.closed.Load()
	cl := c.r.begin(ctx, k, false)
	defer c.r.end(cl)
	if k.cmd.IsRetryable() {
		c.r.register(cl, &k.cmd)
	}
	err := c.run(ctx, cl, func(ctx context.Context) error {
		sent++
		last = nil
		cl.ctx = ctx
		resp = do(ctx, sent > 1)
		if sent == 1 {
			c.r.unregister(cl)
			maybe = cl.maybe // a repeat by valkey-go's loop lost its reply
			if re, ok := cl.stop.(*retry.Error); ok {
				// valkey-go's loop ended the call (run returns cl.stop)
				// after judging the last failure, which a delay wraps in
				// a *CommandError when it had no reply.
				last, _ = re.Err.(*CommandError)
				return nil
			}
		}
		var e error
		// valkey-go's loop decided the repeats of a retryable command's
		// first send, unless another call sent it too (see retryer.delay).
		inner := sent == 1 && k.cmd.IsRetryable() && !cl.shared.Load()
		e, last = c.judge(resp.Error(), k, safe, inner, closedBefore, maybe)
		if last != nil && !retry.IsPermanent(e) {
			maybe = maybe || last.known.Outcome == rediscmd.OutcomeMaybeApplied
		}
		return e
	})
	if maybe && err != nil && !errors.Is(err, retry.ErrMaybeApplied) {
		// A send lost its reply, then the loop ended without sending again
		// (a Throttle's rejection calls no send) or with a reply (a refusal
		// that outlasted the policy, an error reply): the error still says
		// the command may have been applied, the reply kept inside it
		// (returned bare, a refusal would say the command never ran). The
		// *retry.Error is copied, not changed: the Observer was given it
		// and may keep it.
		if re, ok := err.(*retry.Error); ok {
			c := *re
			c.Err = &CommandError{Command: k.name(), Err: re.Err, known: rediscmd.Known{Outcome: afterLost(re.Err), Earlier: true}}
			err = &c
		}
	}
	return c.result(err, sent, resp, last, maybe)
}

// run drives cl's Loop around attempt as retry.Do would, until an attempt
// succeeds or the Loop gives up, and returns nil or the Loop's
// *retry.Error. valkey-go's loop may end the call inside attempt, through
// retryer.delay: then its error is returned as it is.
func (c *client) run(ctx context.Context, cl *call, attempt func(context.Context) error) error {
	for {
		_, err := cl.l.Begin(ctx)
		if err == nil {
			err = attempt(ctx)
			if cl.stop != nil {
				return cl.stop
			}
			if err == nil {
				cl.l.Succeeded(ctx)
				return nil
			}
		}
		if _, stop := cl.l.Failed(ctx, err); stop != nil {
			return stop
		}
		if stop := cl.l.Wait(ctx); stop != nil {
			return stop
		}
	}
}

// judge returns what the Loop is told of a send that ended with err (nil
// for none or a nil reply), and the send's failure without a reply, if
// any. inner says that the send went through valkey-go's loop, which asked
// the call's Loop about every repeat it could make: what it did not repeat
// is not sent again here.
func (c *client) judge(err error, k *kept, safe, inner, closedBefore, maybe bool) (error, *CommandError) {
	if err == nil || valkey.IsValkeyNil(err) {
		return nil, nil
	}
	switch o := classify(err); o {
	case rediscmd.OutcomeRefused:
		if (inner && c.innerRetries(err)) || !k.resendable() {
			return retry.Permanent(err), nil
		}
		return err, nil
	case rediscmd.OutcomeReply:
		return retry.Permanent(err), nil
	default:
		last := &CommandError{Command: k.name(), Err: err, known: rediscmd.Known{Outcome: o, Earlier: maybe}}
		if o == rediscmd.OutcomeFinal { // the client is closed
			last.known.Outcome = final(closedBefore)
			return retry.Permanent(last), last
		}
		if inner || !k.resendable() || (o == rediscmd.OutcomeMaybeApplied && !safe) {
			return retry.Permanent(last), last
		}
		return last, last
	}
}

// afterLost is the outcome given to err, the last failure of a call after
// an earlier send of it lost its reply: a server reply (a refusal, or an
// error reply) keeps its kind, anything else is "not sent".
func afterLost(err error) rediscmd.Outcome {
	var ve *valkey.ValkeyError
	if errors.As(err, &ve) && !valkey.IsValkeyNil(ve) {
		return classify(ve)
	}
	return rediscmd.OutcomeNotSent
}

// result is what a call returns after its loop ended with err (nil on
// success) after sent sends, the last answered with resp or failing
// without a reply with last; maybe says whether a send lost its reply.
func (c *client) result(err error, sent int, resp valkey.ValkeyResult, last *CommandError, maybe bool) valkey.ValkeyResult {
	switch {
	case err == nil:
		return resp
	case sent == 0: // the context ended first, or the Throttle rejected every attempt
		return valkey.NewErrorResult(err)
	}
	if _, ok := valkey.IsValkeyErr(resp.Error()); ok && !maybe {
		// A reply is returned as valkey-go returns it (the last one), unless
		// an earlier send may have been applied: then err says so.
		return resp
	}
	var re *retry.Error
	if last != nil && errors.As(err, &re) && re.Attempts == 1 {
		// One send: its own failure, without the loop's wrapping.
		return valkey.NewErrorResult(last)
	}
	return valkey.NewErrorResult(err)
}
