package retrygrpc

import (
	"io"

	"google.golang.org/protobuf/proto"
)

// commitLocked ends retrying. Precondition: s.mu is held.
func (s *stream) commitLocked() {
	s.committed = true
	s.buf, s.bufSize = nil, 0
}

// settle waits for a SendMsg in flight (one with a kept message: see
// sending) and for a replay to return, and reports whether the stream
// committed. It runs on the goroutine in RecvMsg whenever the current
// attempt failed with an error that would start a retry: in recv, before
// episode starts, and in episode's op, after a retry failed (and its
// context was cancelled) and before the next one. A SendMsg that failed on
// the client ended that attempt, which RecvMsg may see before SendMsg
// returns and commits. grpc-go ends an attempt on every receive error, so
// a SendMsg in flight on it returns without waiting for the network (a
// retry's attempt is cancelled before). (A stream interceptor below this
// one that fails RecvMsg with a retried code while leaving its stream open
// and a SendMsg blocked on flow control would make RecvMsg wait until the
// context ends; the same holds for the wait at episode's switch to a new
// attempt.)
func (s *stream) settle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.sending || s.replaying {
		s.cond.Wait()
	}
	return s.committed
}

// SendMsg sends m on the current attempt, keeping a copy for replay until
// the stream commits. An error other than io.EOF, with which grpc-go ends
// the stream on the client, commits it, ends the attempt's context and is
// returned. While a retry replays the messages sent before, SendMsg waits
// for it.
//
// The attempt that SendMsg sends on stays current until SendMsg has
// returned: after the commit no attempt replaces it, and before it
// episode waits for sending at its switch.
func (s *stream) SendMsg(m any) error {
	s.mu.Lock()
	for s.replaying {
		s.cond.Wait()
	}
	if s.committed {
		a := s.cur
		s.mu.Unlock()
		err := a.cs.SendMsg(m)
		if err != nil && err != io.EOF {
			a.end() // grpc-go ended the stream
		}
		return err
	}
	kept := false
	if pm, ok := m.(proto.Message); ok && s.c.maxBuffer > 0 {
		// Each message counts its gRPC frame too (msgHeaderLen, as
		// grpc-go's retry buffer counts it): a message of default values
		// encodes to nothing, and counted as 0 bytes would let a stream of
		// them grow the buffer without bound.
		if n := msgHeaderLen + proto.Size(pm); s.bufSize+n <= s.c.maxBuffer {
			s.buf = append(s.buf, proto.Clone(pm))
			s.bufSize += n
			kept = true
		}
	}
	if !kept {
		s.commitLocked()
	}
	a := s.cur
	s.sending = kept
	s.mu.Unlock()
	err := a.cs.SendMsg(m)
	if !kept {
		if err != nil && err != io.EOF {
			a.end() // grpc-go ended the stream
		}
		return err
	}
	s.mu.Lock()
	s.sending = false
	local := err != nil && err != io.EOF
	if local {
		// grpc-go refused m on the client and ended the attempt (grpc-go
		// turns transport errors into io.EOF): retrying would replay m
		// into the same failure, or send the server what this attempt
		// never could.
		s.commitLocked()
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	if local {
		s.record(a, err)
		a.end() // grpc-go ended the stream
	}
	if err == io.EOF {
		// The attempt failed; RecvMsg will see why and may retry, sending
		// m again.
		return nil
	}
	return err
}

// CloseSend closes the send side of the current attempt, and of every
// attempt that replaces it, after a replay in progress.
func (s *stream) CloseSend() error {
	s.mu.Lock()
	for s.replaying {
		s.cond.Wait()
	}
	s.sendClosed = true
	a := s.cur
	s.mu.Unlock()
	return a.cs.CloseSend()
}

func (s *stream) commit() {
	s.mu.Lock()
	s.commitLocked()
	s.mu.Unlock()
}
