package retrygrpc

import (
	"context"
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// attempt is one stream opened by the interceptor, with the state that
// belongs to it alone: a late call on an attempt that has been replaced
// (a SendMsg or Header still in flight on it) marks that attempt, not the
// current one.
type attempt struct {
	cs grpc.ClientStream // set when it is opened, before it is published; read-only after
	// cancel ends the attempt's context when the attempt is a retry (nil
	// for a first attempt, which runs on s.actx, the caller's context but
	// for its metadata). Set before
	// the attempt is published, read-only after; a CancelFunc may be
	// called from any goroutine, more than once.
	cancel   context.CancelFunc
	recorded bool // the attempt's outcome was told to the Throttle; guarded by stream.mu
}

// end cancels the attempt's context, when it has one of its own: the
// stream below ends, and so does the context's registration with the
// caller's (with a context type of the caller's own, a goroutine).
//
// It is called on each path by which the stream ends (RecvMsg, SendMsg)
// or the attempt is replaced (episode), not from a watch on the stream
// below (context.AfterFunc on its Context, or grpc.OnFinish): grpc-go's
// Context commits its attempt, which turns off its transparent retry, and
// a retrying layer below (another retrygrpc interceptor) ends one stream
// and opens the next under this same context, which the watch would
// cancel.
func (a *attempt) end() {
	if a.cancel != nil {
		a.cancel()
	}
}

// open opens the stream of attempt a, which the Throttle let through,
// with ctx: s.actx, or a child of it that a.cancel ends. Only the
// goroutine that retries calls it (it counts s.previous).
func (s *stream) open(ctx context.Context, a *attempt) error {
	if s.previous > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, HeaderPreviousAttempts, strconv.Itoa(s.previous))
	}
	s.previous++
	cs, err := s.streamer(ctx, s.desc, s.cc, s.method, s.opts...)
	if err != nil {
		return s.failed(a, err)
	}
	a.cs = cs
	return nil
}

// episode retries after the attempt that failed with ferr (already
// classified; throttled: the Throttle rejected it, unsent) until an
// attempt gets past probe, which is nil when opening is enough and
// otherwise runs on the new stream. It returns that attempt. It runs on
// the goroutine that retries (NewStream's, or RecvMsg's when probe is
// set).
//
// Each retry opens its stream with a context of its own (attempt.cancel),
// cancelled when the attempt fails and a retry may follow, when it is
// replaced or abandoned, and when the stream ends (see RecvMsg and
// SendMsg).
//
// A stream that commits during the wait before a retry (a SendMsg on
// another goroutine) ends the loop at that retry, which is not opened:
// retry.Do has already withdrawn it from the Budget (a retry granted and
// not sent still counts, as for Budget.AllowRetry), and announces it to
// the Observer (EventAttempt; with a Throttle, its Allow decides first)
// and counts it in its *retry.Error before op can tell that the stream
// committed.
func (s *stream) episode(ferr error, throttled bool, probe func(*attempt) error) (*attempt, error) {
	pe := s.p
	pe.Throttle, pe.AttemptTimeout = nil, 0 // the Throttle: see below
	if max := pe.MaxAttempts; max != retry.Unlimited {
		if max == 0 {
			max = retry.DefaultMaxAttempts
		}
		pe.MaxAttempts = max - s.attempts + 1 // the failed attempt counts as the first
	}
	// With MaxElapsed, retry.Do counts Elapsed from before the first
	// attempt: the time the stream ran before this retry.Do is added to
	// the Elapsed it reports, and to its *retry.Error's.
	var off time.Duration
	if pe.MaxElapsed > 0 {
		off = time.Since(s.start)
		pe.MaxElapsed = max(pe.MaxElapsed-off, 1)
	}
	user := s.p.Retryable
	pe.Retryable = func(err error) bool {
		return errors.Is(err, retry.ErrThrottled) || user == nil || user(err)
	}
	s.mu.Lock()
	s.budgeted = true // retry.Do counts the failed attempt as the first (unless throttled, as it would)
	s.mu.Unlock()

	// retry.Do cannot hold the Throttle: it would ask it again about the
	// attempt that already failed and tell it that attempt's outcome again,
	// and a stream's outcome comes after op returns (at its first
	// response), when record tells it. So the Throttle is asked here, when
	// retry.Do announces an attempt to the Observer (EventAttempt, right
	// before it calls op), and a rejection reaches the Observer as
	// retry.Do reports one: EventThrottled instead of EventAttempt. A
	// first attempt that the Throttle rejected goes to retry.Do through a
	// Throttle of its own that rejects it once, so that retry.Do reports it
	// and does not count it for the Budget, as it does a rejected attempt.
	//
	// gated and allowed are shared by the Observer below and op without a
	// lock: retry.Do calls the Observer on the goroutine that called it,
	// which is the one that runs op (do.go: attempt reports EventAttempt
	// and then calls op, both synchronously; retryLoop calls attempt on
	// Do's goroutine).
	t := s.p.Throttle
	var (
		gated   int  // the attempt whose Throttle decision allowed holds, numbered as by retry.Do
		allowed bool // t let attempt gated through
	)
	if t != nil {
		var once *retry.Throttle
		if throttled {
			once = rejectOnce()
			pe.Throttle = once
		}
		obs := s.p.Observer
		pe.Observer = retry.ObserverFunc(func(ctx context.Context, e retry.Event) {
			switch {
			case once != nil && e.Kind == retry.EventThrottled && e.Attempt == 1:
				once.Override(retry.ThrottleAllowAll) // let every later attempt through: t decides
			case e.Kind == retry.EventAttempt && e.Attempt > 1:
				gated, allowed = e.Attempt, t.Allow()
				if !allowed {
					e = retry.Event{Kind: retry.EventThrottled, Attempt: e.Attempt, MaxAttempts: e.MaxAttempts, Err: retry.ErrThrottled, Waited: e.Waited}
				}
			}
			if obs != nil {
				obs.Observe(ctx, e)
			}
		})
	}

	added := false // off was added to the *retry.Error the Observer was given
	if off > 0 && pe.Observer != nil {
		obs := pe.Observer
		pe.Observer = retry.ObserverFunc(func(ctx context.Context, e retry.Event) {
			if e.Kind == retry.EventRetry || e.Kind == retry.EventBudgetRefused || e.Kind == retry.EventDone && e.Err != nil {
				e.Elapsed += off
			}
			if re, ok := e.Err.(*retry.Error); ok && e.Kind == retry.EventDone && !added {
				re.Elapsed += off // the error the stream returns: one Elapsed
				added = true
			}
			obs.Observe(ctx, e)
		})
	}

	var (
		out     *attempt
		calls   int    // calls of op
		last    = ferr // the error of the last attempt sent
		opened  int    // attempts of this episode opened, and not abandoned
		aborted bool   // the stream committed during the episode
	)
	// The loop's first attempt is the one that failed (or that the
	// Throttle rejected), already made: retry.Do must judge it, even when
	// the caller's context has ended since (see loopContext).
	err := retry.Do(&loopContext{Context: s.ctx}, pe, func(context.Context) error {
		calls++
		n := calls // the attempt, numbered as by retry.Do
		if throttled {
			n++ // retry.Do made attempt 1 without op
		} else if n == 1 {
			return ferr
		}
		s.mu.Lock()
		committed := s.committed
		s.mu.Unlock()
		if committed {
			aborted = true
			return retry.Permanent(last)
		}
		s.attempts++
		if t != nil {
			if gated != n {
				allowed = t.Allow() // not announced (no EventAttempt): decide here
			}
			gated = 0
			if !allowed {
				return retry.ErrThrottled // not sent: not counted by the next HeaderPreviousAttempts
			}
		}
		opened++
		actx, cancel := context.WithCancel(s.actx)
		a := &attempt{cancel: cancel}
		if err := s.open(actx, a); err != nil {
			cancel()
			last = err
			return err
		}
		if probe == nil {
			out = a // NewStream makes it current: no one else sees s yet
			return nil
		}
		cs := a.cs
		s.mu.Lock()
		// A SendMsg still in flight on the attempt that failed has kept
		// its message in buf, and may yet fail on the client and commit
		// (a message over grpc.MaxCallSendMsgSize): wait for it, so that
		// a is not sent what that attempt refused. That attempt is over
		// (grpc-go ended it with the error RecvMsg saw, or its context was
		// cancelled), so the SendMsg returns without waiting for the
		// network, as in settle, with the same caveat.
		for s.sending {
			s.cond.Wait()
		}
		if s.committed {
			// A SendMsg committed the stream while a was opening: the
			// buffer it would replay is gone. Abandon a, which sent no
			// request (the Throttle is not told of it).
			s.mu.Unlock()
			cancel()
			aborted, opened = true, opened-1
			return retry.Permanent(last)
		}
		replaced := s.cur
		s.cur = a
		msgs, closeSend := s.buf, s.sendClosed
		s.replaying = len(msgs) > 0
		s.mu.Unlock()
		replaced.end() // the attempt that a replaces failed
		if len(msgs) > 0 {
			go s.replay(cs, msgs, closeSend)
		} else if closeSend {
			cs.CloseSend()
		}
		err := probe(a)
		if err == nil {
			return nil
		}
		ferr := s.failed(a, err)
		if !retry.IsPermanent(ferr) {
			// A retry may follow: end this attempt, and with it its
			// replay, before the next one starts.
			cancel()
			if s.settle() {
				return retry.Permanent(ferr)
			}
		}
		last = ferr
		return ferr
	})
	if re, ok := err.(*retry.Error); ok && off > 0 && !added {
		re.Elapsed += off
	}
	if err != nil {
		if aborted && opened == 0 {
			// The stream committed before any retry was sent: RecvMsg
			// returns the failure it saw, as without the interceptor.
			return nil, original(ferr)
		}
		return nil, result(err)
	}
	return out, nil
}

// rejectOnce returns a Throttle that rejects every attempt until it is
// overridden (episode then lets every attempt through).
func rejectOnce() *retry.Throttle {
	th, err := retry.NewThrottle(retry.ThrottleConfig{})
	if err != nil {
		panic(err) // unreachable: the zero config is valid
	}
	th.Override(retry.ThrottleRejectAll)
	return th
}

// replay sends msgs, the messages that the client sent before cs replaced
// the attempt that failed, on cs, and then closes cs's send side if
// closeSend. It runs on a goroutine of its own, holding no lock, so that
// RecvMsg reads the responses meanwhile: a server that answers each
// request as it reads it would otherwise stop reading once the responses
// filled the flow-control window, and the replay would wait for it
// forever. SendMsg, CloseSend and settle wait for it to end, which keeps
// the client's messages in order. It ends when every message is sent or
// the attempt ends (its context is cancelled when the attempt fails, when
// it is replaced, and when the stream ends: see attempt.end).
func (s *stream) replay(cs grpc.ClientStream, msgs []proto.Message, closeSend bool) {
	var err error
	for _, m := range msgs {
		if err = cs.SendMsg(m); err != nil {
			break // the stream failed: RecvMsg reports why
		}
	}
	if err == nil && closeSend {
		cs.CloseSend()
	}
	s.mu.Lock()
	if err != nil && err != io.EOF {
		// grpc-go refused a message on the client and ended the attempt,
		// as in SendMsg: every attempt would repeat the failure.
		s.commitLocked()
	}
	s.replaying = false
	s.cond.Broadcast()
	s.mu.Unlock()
}
