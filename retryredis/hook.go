package retryredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/rediscmd"
)

// Option configures AddHook. It is the same type as retryvalkey.Option:
// the two Redis modules take the same options. A nil Option is ignored.
type Option = rediscmd.Option

// WithIdempotent declares more commands (by name, case-insensitive) safe to
// repeat on this client, for example a module's commands or scripts called
// through FCALL that you wrote to be idempotent. Prefer MarkSafe for one
// call. By default only the commands described in the package
// documentation are.
func WithIdempotent(names ...string) Option { return rediscmd.WithIdempotent(names...) }

// hooked remembers the clients that already have the hook, so that
// AddHook cannot stack two retry layers on one client.
var hooked sync.Map // weak.Pointer[redis.Client] -> struct{}

// AddHook makes p the one retry layer of c: it adds a hook that retries
// commands, pipelines and transactions as the package documentation
// describes, with p's waits and stop rules, Budget, Throttle and Observer.
//
// It refuses, with an error wrapping ErrClientRetries, a client whose own
// retry loops are on: set Options.MaxRetries to -1 (go-redis's default of
// 0 means 3 retries) and Options.DialerRetries to 1 (its default of 0
// means 5 dials 100 ms apart, without jitter, for every connection it
// opens, which the policy's retries of an unsent command would multiply).
// It also refuses an invalid p (the error of
// p.Validate), a p with an AttemptTimeout on a client without
// Options.ContextTimeoutEnabled (go-redis would not bound the attempt), and
// a client that already has the hook. go-redis's
// Client.WithTimeout returns a copy without the client's hooks, so without
// this retry layer: add the hook to the copy too, or bound calls with their
// contexts instead. ctx bounds the
// one COMMAND call that reads the server's command table; when it fails,
// a built-in table of read-only commands is used and the hook tries again
// at most every 30 s, after a successful command.
func AddHook(ctx context.Context, c *redis.Client, p retry.Policy, opts ...Option) error {
	if c == nil {
		return fmt.Errorf("retryredis: AddHook: nil client")
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("retryredis: AddHook: %w", err)
	}
	if p.AttemptTimeout != 0 && !c.Options().ContextTimeoutEnabled {
		return fmt.Errorf("retryredis: AddHook: Policy.AttemptTimeout %v cannot be applied: go-redis bounds an attempt by its context only with Options.ContextTimeoutEnabled; set it, or bound reads and writes with ReadTimeout and WriteTimeout", p.AttemptTimeout)
	}
	if n := c.Options().MaxRetries; n != 0 {
		return fmt.Errorf("%w: Options.MaxRetries is %d; set it to -1 so that retrykit is the only retry layer", ErrClientRetries, n)
	}
	if n := c.Options().DialerRetries; n != 1 {
		return fmt.Errorf("%w: Options.DialerRetries is %d (go-redis dials up to 5 times, 100 ms apart); set it to 1 so that retrykit is the only retry layer", ErrClientRetries, n)
	}
	key := weak.Make(c)
	if _, loaded := hooked.LoadOrStore(key, struct{}{}); loaded {
		return fmt.Errorf("retryredis: AddHook: client already has the hook")
	}
	runtime.AddCleanup(c, func(k weak.Pointer[redis.Client]) { hooked.Delete(k) }, key)

	cfg := rediscmd.Collect(opts)
	h := &hook{policy: p}
	if len(cfg.Idempotent) > 0 {
		h.table.extra = make(map[string]bool, len(cfg.Idempotent))
		for _, n := range cfg.Idempotent {
			h.table.extra[lower(n)] = true
		}
	}
	h.table.lastTry = time.Now()
	h.table.load(ctx, c.Process)
	c.AddHook(h)
	return nil
}

// hook is the redis.Hook that AddHook adds.
type hook struct {
	policy retry.Policy
	table  commandTable
	// watched is set once a WATCH went through the hook (on the client,
	// or a Tx or Conn of it): from then on a transaction refused at queue
	// time (EXECABORT) is not repeated, since the EXEC that aborted also
	// ended the WATCH of its connection, which the hook cannot tell apart.
	watched atomic.Bool
}

// sharing is set once a Share has started on a *redis.Client: from then
// on, the hooks look for shareKey in a command's context.
var sharing atomic.Bool

// shareKey marks the context of a Share's commands.
type shareKey struct{}

// bypass reports whether a command with ctx goes straight to the client:
// a Share's sync, which is not retried (the next sync is the retry) and
// must not count as a first attempt of the policy's Budget or a request
// of its Throttle, whether the Share started before or after AddHook.
func bypass(ctx context.Context) bool {
	return sharing.Load() && ctx.Value(shareKey{}) != nil
}

func (h *hook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessHook retries one command.
func (h *hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := cmd.Name()
		if name == "watch" {
			h.watched.Store(true)
		}
		if connState(name) {
			return markSetup(next(ctx, cmd))
		}
		if bypass(ctx) {
			return next(ctx, cmd)
		}
		var (
			last    error
			applied bool // an attempt lost its reply: the command may have been applied
		)
		err := retry.Do(ctx, h.policy, func(ctx context.Context) error {
			err := next(ctx, cmd)
			last = err
			if err == nil || err == redis.Nil {
				return nil
			}
			return h.judge(ctx, err, cmd, &applied)
		})
		err = keepApplied(err, applied, cmd.Name())
		if err == nil {
			if h.table.needLoad.Load() {
				h.table.maybeReload(ctx, next)
			}
			return last // nil or redis.Nil
		}
		return replyAtFirst(err, last)
	}
}

// judge turns the error of one attempt of cmd into what the retry loop
// needs: a retryable *CommandError, or one marked Permanent. *applied
// says whether an earlier attempt of the call may have been applied (its
// reply was lost); judge sets it when this one may have been, so that a
// later failure does not claim the command was never applied.
func (h *hook) judge(ctx context.Context, err error, cmd redis.Cmder, applied *bool) error {
	o := classify(err, false)
	switch o {
	case rediscmd.OutcomeReply:
		if *applied {
			return retry.Permanent(&CommandError{Command: cmd.Name(), Err: err, known: rediscmd.Known{Outcome: o, Earlier: true}})
		}
		return retry.Permanent(err)
	case rediscmd.OutcomeFinal:
		return retry.Permanent(&CommandError{Command: cmd.Name(), Err: err, known: rediscmd.Known{Outcome: rediscmd.OutcomeNotSent, Earlier: *applied}})
	}
	ce := &CommandError{Command: cmd.Name(), Err: err, known: rediscmd.Known{Outcome: o, Earlier: *applied}}
	if o == rediscmd.OutcomeMaybeApplied {
		if unwritable(cmd) {
			// go-redis refused an argument's type: it never writes the
			// command whole, at this attempt or any other.
			ce.known.Outcome = rediscmd.OutcomeNotSent
			return retry.Permanent(ce)
		}
		if !h.table.safe(ctx, cmd) {
			return retry.Permanent(ce)
		}
		*applied = true
	}
	return ce
}

// keepApplied returns err, the loop's, saying that the command may have
// been applied when an attempt lost its reply (applied) and the loop then
// ended without sending it again: a Throttle's rejection calls no attempt,
// so it cannot say so itself. The *retry.Error is copied, not changed: the
// Observer was given it and may keep it.
func keepApplied(err error, applied bool, name string) error {
	if !applied || err == nil || errors.Is(err, retry.ErrMaybeApplied) {
		return err
	}
	if re, ok := err.(*retry.Error); ok {
		c := *re
		c.Err = &CommandError{Command: name, Err: re.Err, known: rediscmd.Known{Outcome: rediscmd.OutcomeNotSent, Earlier: true}}
		return &c
	}
	return &CommandError{Command: name, Err: err, known: rediscmd.Known{Outcome: rediscmd.OutcomeNotSent, Earlier: true}}
}

// replyAtFirst returns a server reply that ended the call at its first
// attempt as the client itself would have returned it (so that type
// assertions to redis.Error keep working); every other failure is the
// *retry.Error of the loop.
func replyAtFirst(err, last error) error {
	if re, ok := err.(*retry.Error); ok && re.Attempts == 1 && re.Reason == retry.ReasonPermanent {
		if _, isReply := last.(redis.Error); isReply {
			return last
		}
	}
	return err
}

// ProcessPipelineHook retries a pipeline or a MULTI/EXEC transaction as a
// whole: when nothing of it was sent, or when every command in it is safe
// to repeat.
func (h *hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "watch" {
				h.watched.Store(true)
			}
		}
		if allConnState(cmds) {
			return markSetup(next(ctx, cmds))
		}
		if bypass(ctx) {
			return next(ctx, cmds)
		}
		var (
			last    error
			applied bool // an attempt lost its replies: the commands may have been applied
		)
		attempt := 0
		err := retry.Do(ctx, h.policy, func(ctx context.Context) error {
			if attempt > 0 {
				for _, c := range cmds {
					c.SetErr(nil)
				}
			}
			attempt++
			err := next(ctx, cmds)
			last = err
			if err == redis.Nil {
				// The first error is a missing key; look past it for a
				// refusal, which go-redis does not report first.
				for _, c := range cmds {
					if e := c.Err(); e != nil && e != redis.Nil {
						err = e
						break
					}
				}
			}
			if err == nil || err == redis.Nil {
				return nil
			}
			return h.judgePipeline(ctx, err, cmds, &applied)
		})
		err = keepApplied(err, applied, pipelineName(cmds))
		if err == nil {
			return last
		}
		return replyAtFirst(err, last)
	}
}

// connState reports whether a command sets up the connection it is sent
// on (HELLO, AUTH, SELECT, CLIENT ..., READONLY, READWRITE, RESET, QUIT).
// go-redis sends such commands itself, through the hooks, while it opens a
// connection, inside an attempt of the hook's own loop; and a repeat on
// another connection would not restore the state. They go straight to the
// client: not retried, not counted by a Budget or Throttle, not observed.
func connState(name string) bool {
	switch name {
	case "hello", "auth", "select", "client", "readonly", "readwrite", "reset", "quit":
		return true
	}
	return false
}

// setupError is the transport failure (not a server reply) of a command
// that sets up a connection. go-redis sends those while it opens a
// connection for an attempt, before the attempt's own command or pipeline
// is written, and returns their error as the attempt's: the attempt was
// not sent. It unwraps with Unwrap() []error, which go-redis's
// errors.Unwrap of a failed handshake's error does not strip.
type setupError struct{ err error }

func (e *setupError) Error() string   { return e.err.Error() }
func (e *setupError) Unwrap() []error { return []error{e.err} }

// markSetup marks err, the error of a connection-setup command, as a
// setupError when it is a transport failure; a server reply (go-redis
// falls back to RESP2 when HELLO is refused) and ErrClosed are returned
// as they are.
func markSetup(err error) error {
	if err == nil || errors.Is(err, redis.ErrClosed) {
		return err
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return err
	}
	return &setupError{err}
}

func allConnState(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if !connState(c.Name()) {
			return false
		}
	}
	return len(cmds) > 0
}

func pipelineName(cmds []redis.Cmder) string {
	if len(cmds) > 0 && cmds[0].Name() == "multi" {
		return "multi"
	}
	return "pipeline"
}

// judgePipeline is judge for a pipeline. go-redis returns a transport
// error, or the first command's error reply; for a reply, the pipeline is
// retried only when the only errors in it are refusals (LOADING, ...) and
// every command is safe to repeat, since the others already ran.
//
// *applied is judge's: whether an earlier attempt may have been applied.
func (h *hook) judgePipeline(ctx context.Context, err error, cmds []redis.Cmder, applied *bool) error {
	o := classify(err, true)
	reply := func() error { // the reply, marked when an earlier attempt may have been applied
		if *applied {
			return retry.Permanent(&CommandError{Command: pipelineName(cmds), Err: err, known: rediscmd.Known{Outcome: rediscmd.OutcomeReply, Earlier: true}})
		}
		return retry.Permanent(err)
	}
	switch o {
	case rediscmd.OutcomeReply, rediscmd.OutcomeRefused:
		refused := false
		multi := pipelineName(cmds) == "multi"
		for _, c := range cmds {
			ce := c.Err()
			if ce == nil || ce == redis.Nil {
				continue
			}
			switch classify(ce, true) {
			case rediscmd.OutcomeRefused:
				refused = true
			case rediscmd.OutcomeReply:
				if multi && !h.watched.Load() && redis.HasErrorPrefix(ce, "EXECABORT") {
					// EXEC discarded the transaction because a command
					// was refused when queued: nothing of it ran. Whether
					// it is repeated depends on the queued commands' own
					// errors, which go-redis keeps. Not after a WATCH on
					// this client: the abort ended the WATCH too, and a
					// repeat would run without it.
					continue
				}
				return reply()
			}
		}
		if !refused || !h.table.allSafe(ctx, cmds) {
			return reply()
		}
		return &CommandError{Command: pipelineName(cmds), Err: err, known: rediscmd.Known{Outcome: rediscmd.OutcomeRefused, Earlier: *applied}}
	case rediscmd.OutcomeFinal:
		return retry.Permanent(&CommandError{Command: pipelineName(cmds), Err: err, known: rediscmd.Known{Outcome: rediscmd.OutcomeNotSent, Earlier: *applied}})
	}
	ce := &CommandError{Command: pipelineName(cmds), Err: err, known: rediscmd.Known{Outcome: o, Earlier: *applied}}
	if o == rediscmd.OutcomeMaybeApplied {
		for i, c := range cmds {
			if unwritable(c) {
				// go-redis refused an argument's type: it never writes
				// that command. The commands before it may have been
				// written (the write buffer filled), unless they are a
				// transaction's, which runs only at its EXEC.
				if i == 0 || pipelineName(cmds) == "multi" {
					ce.known.Outcome = rediscmd.OutcomeNotSent
				}
				return retry.Permanent(ce)
			}
		}
		if !h.table.allSafe(ctx, cmds) {
			return retry.Permanent(ce)
		}
		*applied = true
	}
	return ce
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
