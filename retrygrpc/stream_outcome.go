package retrygrpc

import (
	"io"

	"github.com/retrykit/retry"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// record tells the loop the outcome of attempt a, once, as the Throttle
// should judge it: grpc-go's own refusal of an oversized request
// (sendTooLarge) is no sign of overload. When the stream has committed and
// a is its current attempt, the loop ends with that outcome: no retry
// follows. Only the first call for a tells the loop anything (see the
// lock discipline on stream).
func (s *stream) record(a *attempt, err error) {
	var out error
	if err != nil && err != io.EOF {
		st, _ := status.FromError(err)
		out = &attemptError{err: err, code: st.Code(), local: sendTooLarge(st)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.recorded {
		return
	}
	a.recorded = true
	s.loop.Record(out)
	if s.committed && a == s.cur {
		s.finishLocked(out)
	}
}

// finishLocked ends the loop, once, after the stream committed or its
// attempt failed with err, an error that is not retried: with Succeeded
// when err is nil, otherwise with Failed, err being marked permanent
// unless the caller's context has ended (the loop then reports that end,
// as for a unary call). It keeps the *retry.Error that Failed returns in
// s.stop. Precondition: s.mu is held, and the loop's current attempt is
// the one that ended (see the lock discipline on stream).
func (s *stream) finishLocked(err error) {
	if s.ended {
		return
	}
	s.ended = true
	if err == nil {
		s.loop.Succeeded(s.ctx)
		return
	}
	if !retry.IsPermanent(err) && s.ctx.Err() == nil {
		err = retry.Permanent(err)
	}
	_, s.stop = s.loop.Failed(s.ctx, err)
}

// failed records and classifies the error of attempt a (its stream, for
// the trailer, is nil when opening it failed).
func (s *stream) failed(a *attempt, err error) error {
	s.record(a, err)
	var trailer metadata.MD
	if a.cs != nil {
		trailer = a.cs.Trailer()
	}
	return s.c.classify(s.ctx, &s.p, err, trailer, false) // callers check the headers
}
