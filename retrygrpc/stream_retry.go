package retrygrpc

import (
	"context"
	"io"
	"strconv"

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

// episode retries, on the stream's loop, after the attempt that failed
// with ferr (already classified and recorded; retry.ErrThrottled when the
// Throttle rejected it, unsent) until an attempt gets past probe, which is
// nil when opening is enough and otherwise runs on the new stream. It
// returns that attempt. It runs on the goroutine that retries
// (NewStream's, or RecvMsg's when probe is set).
//
// Each retry opens its stream with a context of its own (attempt.cancel),
// cancelled when the attempt fails and a retry may follow, when it is
// replaced or abandoned, and when the stream ends (see RecvMsg and
// SendMsg).
//
// A stream that commits during the wait before a retry (a SendMsg on
// another goroutine) ends the loop at that retry, which is not opened: the
// loop has already withdrawn it from the Budget (a retry granted and not
// sent still counts, as any retry the Budget grants), and it is begun (the
// Throttle asked, the Observer told) and ended unsent, so that the
// *retry.Error counts it when an earlier retry was sent.
func (s *stream) episode(ferr error, probe func(*attempt) error) (*attempt, error) {
	l := &s.loop
	var (
		err    = ferr // the error of the attempt being judged
		last   = ferr // the error of the last attempt sent
		opened int    // attempts of this episode opened, and not abandoned
	)
	for {
		if _, stop := l.Failed(s.ctx, err); stop != nil {
			return nil, s.stopped(stop)
		}
		if stop := l.Wait(s.ctx); stop != nil {
			return nil, s.stopped(stop)
		}
		s.mu.Lock()
		committed := s.committed
		s.mu.Unlock()
		if committed {
			// The retry granted is begun and ended unsent.
			if _, err := l.Begin(s.ctx); err == nil {
				l.Unseen()
			}
			return nil, s.abort(last, ferr, opened)
		}
		if _, err = l.Begin(s.ctx); err != nil {
			continue // rejected by the Throttle: not sent, not counted by the next HeaderPreviousAttempts
		}
		opened++
		actx, cancel := context.WithCancel(s.actx)
		a := &attempt{cancel: cancel}
		if err = s.open(actx, a); err != nil {
			cancel()
			last = err
			continue
		}
		if probe == nil {
			return a, nil // NewStream makes it current: no one else sees s yet
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
			l.Unseen()
			return nil, s.abort(last, ferr, opened-1)
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
		if err = probe(a); err == nil {
			return a, nil // committed: record ended the loop
		}
		err = s.failed(a, err)
		s.mu.Lock()
		ended, stop := s.ended, s.stop
		s.mu.Unlock()
		if ended {
			// The stream committed before a failed (its headers, or a
			// SendMsg that failed on the client): record ended the loop,
			// with Succeeded when the headers came through Header.
			if stop == nil {
				return nil, original(err)
			}
			return nil, result(stop)
		}
		if !retry.IsPermanent(err) {
			// A retry may follow: end this attempt, and with it its
			// replay, before the next one starts.
			cancel()
			if s.settle() {
				err = retry.Permanent(err)
			}
		}
		last = err
	}
}

// abort ends the loop after the stream committed during an episode,
// before the retry that the loop granted was sent (the loop's current
// attempt is that retry, begun and unseen, or rejected by the Throttle):
// last is the error of the last attempt sent, ferr the failure that
// started the episode, opened the number of its attempts that were opened.
// When none was, RecvMsg returns the failure it saw, as without the
// interceptor.
func (s *stream) abort(last, ferr error, opened int) error {
	_, stop := s.loop.Failed(s.ctx, retry.Permanent(last))
	err := s.stopped(stop)
	if opened == 0 {
		return original(ferr)
	}
	return err
}

// stopped marks the loop ended by the goroutine that retries, with stop,
// and returns the interceptor's error for it.
func (s *stream) stopped(stop error) error {
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
	return result(stop)
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
