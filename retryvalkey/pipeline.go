package retryvalkey

import (
	"context"
	"strings"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/rediscmd"
	"github.com/valkey-io/valkey-go"
)

// wrap returns resp, with an error that is not a server reply wrapped in a
// *CommandError; closedBefore says whether the client was closed before the
// call began, earlier whether an earlier send of the command may have been
// applied.
func wrap(resp valkey.ValkeyResult, cmdName string, closedBefore, earlier bool) valkey.ValkeyResult {
	err := resp.NonValkeyError()
	if err == nil {
		if ve, ok := valkey.IsValkeyErr(resp.Error()); ok && earlier {
			// An error reply after a send that lost its reply: not
			// returned bare, since a refusal would say the command was
			// not run. (IsValkeyErr leaves out a nil reply, an answer.)
			return valkey.NewErrorResult(&CommandError{Command: cmdName, Err: ve, known: rediscmd.Known{Outcome: classify(ve), Earlier: true}})
		}
		return resp
	}
	o := classify(err)
	if o == rediscmd.OutcomeFinal {
		o = final(closedBefore)
	}
	return valkey.NewErrorResult(&CommandError{Command: cmdName, Err: err, known: rediscmd.Known{Outcome: o, Earlier: earlier}})
}

// DoMulti sends commands in one pipeline (or a MULTI ... EXEC block). It is
// repeated by valkey-go's loop, as a whole, only when every command in it
// (MULTI and EXEC aside) is safe to repeat; DoMulti then marks the
// commands in multi ToRetryable (it sets that flag in the caller's slice).
// In a pipeline without MULTI whose failed commands form its tail (every
// command from the first failure on failed: a connection lost, a server
// refusing), that tail is sent again, in order, as a smaller pipeline, as
// the policy says, when each of its commands was refused, was not sent, or
// lost its reply and all are safe. A failure followed by a success is not
// sent again: it would run after a command meant to run after it. A
// MULTI ... EXEC block is sent again only by valkey-go's loop.
func (c *client) DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult {
	return c.doMulti(ctx, c.Client, multi)
}

// doMulti is DoMulti through to.
func (c *client) doMulti(ctx context.Context, to valkey.CoreClient, multi []valkey.Completed) []valkey.ValkeyResult {
	if len(multi) == 0 {
		return to.DoMulti(ctx, multi...)
	}
	all, tx := true, false
	for i := range multi {
		if txWord(&multi[i]) {
			tx = true
		} else if !c.safe(ctx, &multi[i]) {
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
		resps []valkey.ValkeyResult
		from  int  // the tail from here on is sent again
		sent  int  // sends of the pipeline (or of its tail)
		maybe bool // a send of the tail lost a reply: its commands may have been applied
	)
	closedBefore := c.closed.Load()
	cl := c.r.begin(ctx, ks[0], true)
	defer c.r.end(cl)
	for i := range multi {
		if multi[i].IsRetryable() {
			c.r.register(cl, &multi[i])
		}
	}
	err := c.run(ctx, cl, func(ctx context.Context) error {
		sent++
		cl.ctx = ctx
		if sent == 1 {
			resps = to.DoMulti(ctx, multi...)
			c.r.unregister(cl)
		} else {
			again := make([]valkey.Completed, 0, len(ks)-from)
			for _, k := range ks[from:] {
				again = append(again, k.build(to.B()))
			}
			copy(resps[from:], to.DoMulti(ctx, again...))
		}
		first := -1 // the first command of this send that failed
		resend := !tx
		lost := false // a failed command of this send may have been applied
		for i := from; i < len(resps); i++ {
			err := resps[i].Error()
			if err == nil || valkey.IsValkeyNil(err) {
				if first >= 0 {
					resend = false // a failure followed by a success
				}
				continue
			}
			if first < 0 {
				first = i
			}
			// valkey-go's loop already repeated, as the policy says, a whole
			// pipeline of retryable commands, and in a cluster each
			// retryable command on its own.
			// A command another call sent too is not repeated there
			// (see retryer.delay).
			inner := sent == 1 && !cl.shared.Load() && (all || (c.cluster && ks[i].cmd.IsRetryable()))
			switch classify(err) {
			case rediscmd.OutcomeRefused:
				resend = resend && !(inner && c.innerRetries(err))
			case rediscmd.OutcomeNotSent:
				resend = resend && !inner
			case rediscmd.OutcomeMaybeApplied:
				resend = resend && !inner && all
				lost = true
			default:
				resend = false
			}
			resend = resend && ks[i].resendable()
		}
		// The commands before from all succeeded, so the tail decides.
		switch {
		case first < 0:
			return nil
		case resend:
			from = first
			maybe = maybe || lost
			return resps[first].Error()
		}
		return retry.Permanent(resps[first].Error())
	})
	if sent == 0 { // the context ended first, or the Throttle rejected every attempt
		out := make([]valkey.ValkeyResult, len(multi))
		for i := range out {
			out[i] = valkey.NewErrorResult(err)
		}
		return out
	}
	for i := range resps {
		resps[i] = wrap(resps[i], ks[i].name(), closedBefore, maybe && i >= from)
	}
	return resps
}

func txWord(cmd *valkey.Completed) bool {
	n := name(cmd)
	return strings.EqualFold(n, "MULTI") || strings.EqualFold(n, "EXEC")
}

// DoMultiCache sends cacheable (read-only) commands in one pipeline, on a
// retry.Loop of the policy: valkey-go's loop repeats the pipeline, as a
// whole, as the Loop says. It is not sent again by this client: a failure
// valkey-go did not repeat ends the call. A failure without a reply comes
// back as a *CommandError, as from DoMulti.
func (c *client) DoMultiCache(ctx context.Context, multi ...valkey.CacheableTTL) []valkey.ValkeyResult {
	if len(multi) == 0 {
		return c.Client.DoMultiCache(ctx, multi...)
	}
	k := keep((*valkey.Completed)(&multi[0].Cmd))
	defer k.release()
	closedBefore := c.closed.Load()
	cl := c.r.begin(ctx, k, true)
	defer c.r.end(cl)
	for i := range multi {
		c.r.register(cl, (*valkey.Completed)(&multi[i].Cmd))
	}
	var resps []valkey.ValkeyResult
	err := c.run(ctx, cl, func(ctx context.Context) error {
		cl.ctx = ctx
		resps = c.Client.DoMultiCache(ctx, multi...)
		c.r.unregister(cl)
		var first error
		for _, r := range resps {
			if err := r.Error(); err != nil && !valkey.IsValkeyNil(err) {
				first = err
				break
			}
		}
		return sentOnce(ctx, cl, first, false)
	})
	if resps == nil { // the context ended first, or the Throttle rejected every attempt
		out := make([]valkey.ValkeyResult, len(multi))
		for i := range out {
			out[i] = valkey.NewErrorResult(err)
		}
		return out
	}
	for i := range resps {
		// valkey-go recycled the commands that succeeded (or whose
		// transaction aborted): only the others' names are read.
		if e := resps[i].NonValkeyError(); e != nil && e != valkey.ErrDoCacheAborted {
			resps[i] = wrap(resps[i], name((*valkey.Completed)(&multi[i].Cmd)), closedBefore, false)
		}
	}
	return resps
}
