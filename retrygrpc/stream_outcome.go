package retrygrpc

import (
	"io"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// record tells the Throttle the outcome of attempt a, once, judged as
// classify judges it: grpc-go's own refusal of an oversized request
// (sendTooLarge) is no sign of overload.
func (s *stream) record(a *attempt, err error) {
	t := s.p.Throttle
	if t == nil {
		return
	}
	s.mu.Lock()
	done := a.recorded
	a.recorded = true
	s.mu.Unlock()
	if done {
		return
	}
	if err == nil || err == io.EOF {
		recordThrottle(t, nil)
		return
	}
	st, _ := status.FromError(err)
	recordThrottle(t, &attemptError{err: err, code: st.Code(), local: sendTooLarge(st)})
}

// countFirstLocked counts the stream's first attempt for the Budget, once:
// when the stream commits, or when its first attempt fails without a
// retry. An attempt that fails with a retry is counted by the retry.Do of
// episode instead, as its first. Precondition: s.mu is held.
func (s *stream) countFirstLocked() {
	if s.budgeted {
		return
	}
	s.budgeted = true
	if b := s.p.Budget; b != nil {
		b.RecordAttempt()
	}
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
