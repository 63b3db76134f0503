package retrygrpc

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// StreamClientInterceptor returns an interceptor that retries a stream
// until it commits, with the waits and stop rules of p and the codes,
// methods and server delays of opts, as UnaryClientInterceptor does.
//
// A stream commits (gRFC A6) when the first response message or the
// server's response headers arrive, when the request messages sent so far
// no longer fit in the replay buffer (WithMaxBuffer, 256 KiB by default; a
// message that is not a proto.Message also commits), or when SendMsg fails
// with an error other than io.EOF: grpc-go then ended the stream on the
// client (a message larger than grpc.MaxCallSendMsgSize, say), and that
// error is returned by SendMsg, and by RecvMsg after it, as without the
// interceptor. Until the stream commits, each message the client sends is
// kept (a proto.Clone, so the caller may reuse it) and a retry opens a new
// stream, sends them again in order, and closes the send side if the
// client had; after it, errors are returned as they come, so the
// application never sees a response twice.
//
// Retries happen inside NewStream (when opening fails) and RecvMsg, never
// inside Header: like grpc-go's, Header returns nil, nil when the current
// attempt failed without headers, and the next RecvMsg reports the
// failure and may retry; Header then returns the headers of the attempt
// that replaced it. p.AttemptTimeout does not apply to streams (their
// length is the application's): bound them with the context.
//
// grpc-previous-rpc-attempts counts the attempts sent, as on unary calls:
// an attempt that the Throttle rejected was never sent and is not counted.
// A "do not retry" pushback, or a server wait beyond WithMaxServerDelay,
// on the first failure gives a *retry.Error, as on unary calls, so that
// enclosing retry loops do not retry it either.
//
// The loop is retry.Do's, started at the first failure with that failure
// as its first attempt: MaxAttempts and MaxElapsed count from the start of
// the stream, and Budget, the nesting rule and the Observer apply (a
// stream that succeeds without a retry is counted by the Budget as a
// first attempt when it commits; the Observer hears of streams only when
// they fail). The Throttle is asked before each attempt and told each
// attempt's outcome, judged as retry.Do judges it (ThrottleConfig.Accepted
// when set, the overload codes when not). When opening the stream failed
// and was retried, and the stream then fails again before committing (in
// RecvMsg), a second retry.Do continues with the attempts and time left:
// the Observer sees its attempts numbered from 1 again and the Budget
// counts one more first attempt.
func StreamClientInterceptor(p retry.Policy, opts ...Option) grpc.StreamClientInterceptor {
	c := newConfig(opts)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		if !c.retriesMethod(method) {
			return streamer(ctx, desc, cc, method, callOpts...)
		}
		if err := p.Validate(); err != nil {
			return nil, err
		}
		s := &stream{
			ctx: ctx, c: c, p: p, desc: desc, cc: cc, method: method,
			streamer: streamer, opts: callOpts, start: time.Now(),
		}
		s.sent.L = &s.mu
		cs, err := s.open(ctx)
		if err != nil {
			if ctx.Err() != nil || retry.IsPermanent(err) {
				return nil, original(err)
			}
			if cs, err = s.episode(err, nil); err != nil {
				return nil, err
			}
		}
		s.cur = cs
		return s, nil
	}
}

// stream is a grpc.ClientStream that retries until it commits.
type stream struct {
	ctx      context.Context // the caller's
	c        *config
	p        retry.Policy
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption
	start    time.Time
	attempts int // attempts made, sent or rejected by the Throttle; touched only by the goroutine retrying
	previous int // attempts sent to the server, for HeaderPreviousAttempts; idem

	mu         sync.Mutex
	cur        grpc.ClientStream
	committed  bool
	sending    bool      // a SendMsg is in flight, sent before the stream committed
	sent       sync.Cond // on mu: signalled when that SendMsg returns
	recorded   bool      // the current attempt's outcome was told to the Throttle
	budgeted   bool      // the stream was counted as a first attempt by a Budget
	buf        []proto.Message
	bufSize    int
	sendClosed bool
}

// open starts an attempt: asks the Throttle and opens a stream.
func (s *stream) open(ctx context.Context) (grpc.ClientStream, error) {
	s.attempts++
	if t := s.p.Throttle; t != nil && !t.Allow() {
		return nil, retry.ErrThrottled // not sent: not counted by the next HeaderPreviousAttempts
	}
	if s.previous > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, HeaderPreviousAttempts, strconv.Itoa(s.previous))
	}
	s.previous++
	s.mu.Lock()
	s.recorded = false
	s.mu.Unlock()
	cs, err := s.streamer(ctx, s.desc, s.cc, s.method, s.opts...)
	if err != nil {
		return nil, s.failed(nil, err)
	}
	return cs, nil
}

// record tells the Throttle the outcome of the current attempt, once. A
// stream that succeeds without a retry counts as a first attempt for the
// Budget here; one that fails is counted by retry.Do in episode.
func (s *stream) record(err error) {
	t, b := s.p.Throttle, s.p.Budget
	if t == nil && b == nil {
		return
	}
	s.mu.Lock()
	done := s.recorded
	s.recorded = true
	first := !s.budgeted && (err == nil || err == io.EOF)
	s.budgeted = s.budgeted || first
	s.mu.Unlock()
	if first && b != nil {
		b.RecordAttempt()
	}
	if !done && t != nil {
		if err == nil || err == io.EOF {
			recordThrottle(t, nil)
		} else {
			recordThrottle(t, &attemptError{err: err, code: status.Code(err)})
		}
	}
}

// failed records and classifies the error of an attempt; cs, when not
// nil, is the stream that failed (for its trailer).
func (s *stream) failed(cs grpc.ClientStream, err error) error {
	s.record(err)
	var trailer metadata.MD
	if cs != nil {
		trailer = cs.Trailer()
	}
	return s.c.classify(s.ctx, &s.p, err, trailer, false) // callers check the headers
}

// episode retries after the attempt that failed with ferr (already
// classified) until an attempt gets past probe, which is nil when opening
// is enough and otherwise runs on the new stream. It returns that stream.
func (s *stream) episode(ferr error, probe func(grpc.ClientStream) error) (grpc.ClientStream, error) {
	pe := s.p
	pe.Throttle, pe.AttemptTimeout = nil, 0 // asked and told by open and record
	if max := pe.MaxAttempts; max != retry.Unlimited {
		if max == 0 {
			max = retry.DefaultMaxAttempts
		}
		pe.MaxAttempts = max - s.attempts + 1 // the failed attempt counts as the first
	}
	if pe.MaxElapsed > 0 {
		pe.MaxElapsed = max(pe.MaxElapsed-time.Since(s.start), 1)
	}
	user := s.p.Retryable
	pe.Retryable = func(err error) bool {
		return errors.Is(err, retry.ErrThrottled) || user == nil || user(err)
	}
	s.mu.Lock()
	s.budgeted = true // retry.Do counts the failed attempt as the first
	s.mu.Unlock()
	first := true
	var out grpc.ClientStream
	err := retry.Do(s.ctx, pe, func(context.Context) error {
		if first {
			first = false
			return ferr
		}
		s.mu.Lock()
		if s.committed {
			s.mu.Unlock()
			return retry.Permanent(ferr)
		}
		s.mu.Unlock()
		cs, err := s.open(s.ctx)
		if err != nil {
			return err
		}
		s.replay(cs)
		if probe != nil {
			if err := probe(cs); err != nil {
				ferr := s.failed(cs, err)
				if !retry.IsPermanent(ferr) && s.settle() {
					return retry.Permanent(ferr)
				}
				return ferr
			}
		}
		out = cs
		return nil
	})
	if err != nil {
		return nil, result(err)
	}
	return out, nil
}

// replay makes cs the current stream and sends it what the client sent.
// Holding the lock keeps SendMsg and CloseSend from interleaving.
func (s *stream) replay(cs grpc.ClientStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = cs
	for _, m := range s.buf {
		if cs.SendMsg(m) != nil {
			return // the stream failed: RecvMsg reports why
		}
	}
	if s.sendClosed {
		cs.CloseSend()
	}
}

// commitLocked ends retrying. Precondition: s.mu is held.
func (s *stream) commitLocked() {
	s.committed = true
	s.buf, s.bufSize = nil, 0
}

func (s *stream) current() (grpc.ClientStream, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.committed
}

// settle waits for a SendMsg in flight to return, and reports whether the
// stream committed. It is called only when RecvMsg failed on the current
// attempt with an error that would start a retry: a SendMsg that failed on
// the client ended that attempt, which RecvMsg may see before SendMsg
// returns and commits. grpc-go ends an attempt on every receive error, so
// a SendMsg in flight on it returns without waiting for the network. (A
// stream interceptor below this one that fails RecvMsg with a retried code
// while leaving its stream open and a SendMsg blocked on flow control
// would make RecvMsg wait until the context ends.)
func (s *stream) settle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.sending {
		s.sent.Wait()
	}
	return s.committed
}

// SendMsg sends m on the current attempt, keeping a copy for replay until
// the stream commits. An error other than io.EOF, with which grpc-go ends
// the stream on the client, commits it and is returned.
func (s *stream) SendMsg(m any) error {
	s.mu.Lock()
	if s.committed {
		cs := s.cur
		s.mu.Unlock()
		return cs.SendMsg(m)
	}
	kept := false
	if pm, ok := m.(proto.Message); ok && s.c.maxBuffer > 0 {
		if n := proto.Size(pm); s.bufSize+n <= s.c.maxBuffer {
			s.buf = append(s.buf, proto.Clone(pm))
			s.bufSize += n
			kept = true
		}
	}
	if !kept {
		s.commitLocked()
	}
	cs := s.cur
	s.sending = kept
	s.mu.Unlock()
	err := cs.SendMsg(m)
	if !kept {
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
	s.sent.Broadcast()
	s.mu.Unlock()
	if local {
		s.record(err)
	}
	if err == io.EOF {
		// The attempt failed; RecvMsg will see why and may retry, sending
		// m again.
		return nil
	}
	return err
}

// CloseSend closes the send side of the current attempt, and of every
// attempt that replaces it.
func (s *stream) CloseSend() error {
	s.mu.Lock()
	s.sendClosed = true
	cs := s.cur
	s.mu.Unlock()
	return cs.CloseSend()
}

// RecvMsg receives the next message. Before the stream commits, an error
// that the interceptor retries starts a new attempt.
func (s *stream) RecvMsg(m any) error {
	cs, committed := s.current()
	err := cs.RecvMsg(m)
	if committed {
		s.record(err)
		return err
	}
	if err == nil || err == io.EOF {
		s.commit()
		s.record(err)
		return err
	}
	if md, _ := cs.Header(); md != nil {
		// The server sent headers before failing: the call is committed.
		s.commit()
		s.record(err)
		return err
	}
	ferr := s.failed(cs, err)
	if s.ctx.Err() != nil || retry.IsPermanent(ferr) && !refused(ferr) {
		s.commit()
		return err
	}
	if s.settle() {
		// A concurrent SendMsg failed on the client and committed.
		return err
	}
	// Retryable, or refused by the server: the loop retries the one and
	// returns the other as a *retry.Error, for enclosing retry layers.
	var recvErr error
	_, rerr := s.episode(ferr, func(cs grpc.ClientStream) error {
		err := cs.RecvMsg(m)
		if err == nil || err == io.EOF {
			s.commit()
			s.record(err)
			recvErr = err
			return nil
		}
		if md, _ := cs.Header(); md != nil {
			s.commit() // headers arrived: no more retries
		}
		return err
	})
	if rerr != nil {
		s.commit()
		return rerr
	}
	return recvErr
}

// Header returns the response headers of the current attempt; their
// arrival commits the stream. Like grpc-go's, it returns nil, nil for a
// stream that failed without headers: RecvMsg then reports (and may
// retry) the failure.
func (s *stream) Header() (metadata.MD, error) {
	cs, committed := s.current()
	md, err := cs.Header()
	if md != nil && !committed {
		s.commit()
		s.record(nil)
	}
	return md, err
}

// Trailer returns the trailer of the current attempt.
func (s *stream) Trailer() metadata.MD {
	cs, _ := s.current()
	return cs.Trailer()
}

// Context returns the context of the current attempt.
func (s *stream) Context() context.Context {
	cs, _ := s.current()
	return cs.Context()
}

func (s *stream) commit() {
	s.mu.Lock()
	s.commitLocked()
	s.mu.Unlock()
}
