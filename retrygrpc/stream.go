package retrygrpc

import (
	"context"
	"io"
	"sync"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// StreamClientInterceptor returns an interceptor that retries a stream
// until it commits, with the waits and stop rules of p and the codes,
// methods and server waits of opts, as UnaryClientInterceptor does.
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
// application never sees a response twice. A stream that commits while a
// retry is opening its new stream (a SendMsg on another goroutine) ends
// the retry: the new stream is cancelled unused, and RecvMsg returns the
// error of the attempt that failed.
//
// Retries happen inside NewStream (when opening fails) and RecvMsg, never
// inside Header: like grpc-go's, Header returns nil, nil when the current
// attempt failed without headers, and the next RecvMsg reports the
// failure and may retry; Header then returns the headers of the attempt
// that replaced it. A retry in RecvMsg sends the kept messages on a
// goroutine of its own while RecvMsg waits for the new attempt's first
// response, so that a server that answers each request as it reads it
// is read meanwhile (otherwise both sides could block on flow control);
// no lock is held across network sends, SendMsg and CloseSend wait until
// the replay is done (the messages stay in order), and the goroutine
// ends with the replay or with the attempt. A replay that fails part-way
// fails its attempt, which is then retried or not by the usual rules.
//
// Each retry opens its stream with a child of the caller's context (the
// first attempt uses the caller's context itself). That child is
// cancelled when the retry fails with an error that may be retried, when
// a later attempt replaces it or it is abandoned unused, and when the
// stream ends in one of these ways (grpc-go's ClientStream contract):
// RecvMsg returns an error (io.EOF included), RecvMsg returns the one
// response of a stream without server streaming (CloseAndRecv), SendMsg
// returns an error other than io.EOF, or the caller's context ends. After
// ClientConn.Close, which the contract also names, it lasts until the
// next RecvMsg (which fails) or the end of the caller's context.
// It returns an error, and no interceptor, for an invalid p (wrapping the
// error of p.Validate, which names the field), for a p with an
// AttemptTimeout (the error names Policy.AttemptTimeout: a stream's length
// is the application's, which no timeout per attempt can know; bound
// streams with the context) and for WithHedging with a nil Hedger (streams
// are not hedged, but the option is refused wherever it is given).
//
// grpc-previous-rpc-attempts counts the attempts sent, as on unary calls:
// an attempt that the Throttle rejected was never sent and is not counted,
// and a value in the caller's outgoing metadata is dropped, on the methods
// that WithMethods leaves out too. A "do not retry" pushback, or a server
// wait beyond WithMaxServerWait, on the first failure (of opening the
// stream or of RecvMsg) gives a *retry.Error, as on unary calls, so that
// enclosing retry loops do not retry it either. A stream whose context has
// already ended is opened once, as without the interceptor, and grpc-go's
// error returned unchanged. A stream that the caller's context ends after
// a failure that is retried (in the wait before a retry, or before it
// began) fails, in NewStream or RecvMsg, as a unary call does: with an
// error that matches the context's, whose status is CANCELLED or
// DEADLINE_EXCEEDED, wrapping the *retry.Error.
//
// Each stream is one retry.Loop (the loop retry.Do is built on), from
// NewStream until the stream commits or the loop gives up; a retry in
// NewStream and one in RecvMsg are attempts of that same loop. So
// MaxAttempts, MaxElapsed, Budget, Throttle, the nesting rule, the
// Observer and the Logger apply as in retry.Do: the Throttle is asked
// before each attempt (one it rejects is not sent, reaches the Observer as
// EventThrottled and is not counted by the Budget) and told each attempt's
// outcome as soon as it is known, judged as retry.Do judges it
// (ThrottleConfig.Accepted when set, the overload codes when not;
// grpc-go's own RESOURCE_EXHAUSTED for a message over
// grpc.MaxCallSendMsgSize is no overload); Elapsed counts from the start
// of the stream with MaxElapsed, and from the first failure without it.
// The Observer hears EventAttempt as each attempt begins and EventDone
// once, when the stream's outcome ends the loop: its first response or
// response headers (success), or the error of a stream that commits or is
// not retried; it comes on the goroutine that learns that outcome
// (RecvMsg, Header or SendMsg) with the stream's lock held, so an Observer
// or Logger must not call the stream's methods. A stream that commits
// during the wait before a retry ends the loop without sending that
// retry, which the loop has already taken from the Budget (a retry granted
// and not sent still counts); it is begun (the Throttle asked, the
// Observer told EventAttempt), ended unsent, and counted in the
// *retry.Error's Attempts when an earlier retry was sent.
func StreamClientInterceptor(p retry.Policy, opts ...Option) (grpc.StreamClientInterceptor, error) {
	c, err := build("StreamClientInterceptor", p, true, opts)
	if err != nil {
		return nil, err
	}
	return streaming(p, c), nil
}

// streaming is StreamClientInterceptor once p and c are known to be valid.
func streaming(p retry.Policy, c *config) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		// The key is the retry layer's on every method it is installed for:
		// a method that is not retried gets a first attempt, which carries
		// none. No allocation when the caller's metadata lacks it.
		actx := withoutPrevious(ctx)
		if !c.retriesMethod(method) {
			return streamer(actx, desc, cc, method, callOpts...)
		}
		if ctx.Err() != nil {
			// Ended before the first attempt: as without the interceptor,
			// and as UnaryClientInterceptor does, grpc-go's error
			// unchanged (no Throttle, Budget or Observer sees it).
			return streamer(actx, desc, cc, method, callOpts...)
		}
		s := &stream{
			ctx: ctx, actx: actx, c: c, p: p, desc: desc, cc: cc, method: method,
			streamer: streamer, opts: callOpts,
		}
		s.cond.L = &s.mu
		s.loop = s.p.Loop()
		s.cur = &s.first
		_, err := s.loop.Begin(ctx) // retry.ErrThrottled: not sent, not counted by the next HeaderPreviousAttempts
		if err == nil {
			if err = s.open(actx, &s.first); err != nil && !retriedCode(err) {
				// Not retried, and nothing for enclosing layers to learn:
				// grpc-go's error unchanged. An error that the server's
				// answer refused goes through episode, as in recv, and
				// comes back as a *retry.Error; so does one after which
				// the caller's context ended (the loop reports that end).
				s.mu.Lock()
				s.finishLocked(err)
				s.mu.Unlock()
				return nil, original(err)
			}
		}
		if err != nil {
			a, err := s.episode(err, nil)
			if err != nil {
				return nil, err
			}
			s.cur = a
		}
		return s, nil
	}
}

// stream is a grpc.ClientStream that retries until it commits.
//
// Lock discipline. The fields above mu, but for previous and loop, are
// set by NewStream before it returns s and only read after (by any
// goroutine, without a lock). previous belongs to the goroutine that
// retries, without a lock: the NewStream goroutine until NewStream
// returns s, then the goroutine in RecvMsg (NewStream's return happens
// before any RecvMsg, and grpc-go's ClientStream contract forbids
// concurrent RecvMsg calls). loop belongs to that goroutine too, with one
// exception: record, under mu, tells it the outcome of the current
// attempt the first time that outcome is known, and ends it (finishLocked)
// when the stream has committed. The goroutine that retries therefore
// uses loop only before it publishes an attempt (as s.cur) or after
// record has told the loop that attempt's outcome, and checks ended under
// mu before it goes on. The fields below mu are guarded by mu, with the
// exceptions noted. No lock is held across a call into the stream below
// (SendMsg, RecvMsg, Header, CloseSend, opening one).
type stream struct {
	ctx      context.Context // the caller's
	actx     context.Context // the attempts': ctx without the caller's grpc-previous-rpc-attempts
	c        *config
	p        retry.Policy
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption
	previous int        // attempts sent to the server, for HeaderPreviousAttempts (see above)
	loop     retry.Loop // the stream's retry loop, on s.p (see above)

	mu   sync.Mutex
	cond sync.Cond // on mu: broadcast when sending or replaying turns false
	// first is the first attempt, kept here so that a stream that needs
	// no retry allocates no attempt of its own. Filled by NewStream before
	// it returns s; its recorded field is guarded by mu like any attempt's.
	first attempt
	// cur is the current attempt: the one that SendMsg, CloseSend,
	// Header, Trailer and Context use. Written by NewStream without the
	// lock before it returns s (no other goroutine has s yet), then only
	// by episode on the goroutine in RecvMsg, under mu; read under mu.
	cur       *attempt
	committed bool // no more retries; set once, never cleared
	// sending: a SendMsg is in flight with a message that it kept in buf
	// (a message sent after the commit, or the one that commits, is not
	// counted). Until it returns, the message may yet fail on the client
	// and commit the stream: settle and episode's switch to a new attempt
	// wait for it.
	sending   bool
	replaying bool // replay is sending the buffer on cur
	// ended: the loop ended (Succeeded, or Failed with the error that
	// stopped it); stop is that error, nil after Succeeded.
	ended      bool
	stop       error
	buf        []proto.Message
	bufSize    int
	sendClosed bool
}

// current returns the current attempt and whether the stream committed.
func (s *stream) current() (*attempt, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.committed
}

// RecvMsg receives the next message. Before the stream commits, an error
// that the interceptor retries starts a new attempt. When the stream ends
// (an error, io.EOF included, or the one response of a stream without
// server streaming, as CloseAndRecv reads it), the current attempt's
// context is cancelled.
func (s *stream) RecvMsg(m any) error {
	err := s.recv(m)
	if err != nil || !s.desc.ServerStreams {
		s.release()
	}
	return err
}

func (s *stream) recv(m any) error {
	a, committed := s.current()
	cs := a.cs
	err := cs.RecvMsg(m)
	if committed {
		s.record(a, err)
		return err
	}
	if err == nil || err == io.EOF {
		s.commit()
		s.record(a, err)
		return err
	}
	if md, _ := cs.Header(); md != nil {
		// The server sent headers before failing: the call is committed.
		s.commit()
		s.record(a, err)
		return err
	}
	ferr := s.failed(a, err)
	if !retriedCode(ferr) {
		s.mu.Lock()
		s.commitLocked()
		s.finishLocked(ferr)
		s.mu.Unlock()
		return err
	}
	if s.settle() {
		// A concurrent SendMsg failed on the client and committed.
		s.mu.Lock()
		s.finishLocked(retry.Permanent(ferr))
		s.mu.Unlock()
		return err
	}
	// Retryable, or refused by the server: the loop retries the one and
	// returns the other as a *retry.Error, for enclosing retry layers (and
	// reports a context that has ended since the failure).
	var recvErr error
	_, rerr := s.episode(ferr, func(a *attempt) error {
		err := a.cs.RecvMsg(m)
		if err == nil || err == io.EOF {
			s.commit()
			s.record(a, err)
			recvErr = err
			return nil
		}
		if md, _ := a.cs.Header(); md != nil {
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

// release cancels the context of the current attempt, when it is a retry,
// once RecvMsg has ended the stream: grpc-go's own contexts end with the
// stream, and this one is a child of the caller's.
func (s *stream) release() {
	a, _ := s.current()
	a.end()
}

// Header returns the response headers of the current attempt; their
// arrival commits the stream. Like grpc-go's, it returns nil, nil for a
// stream that failed without headers: RecvMsg then reports (and may
// retry) the failure.
func (s *stream) Header() (metadata.MD, error) {
	a, committed := s.current()
	md, err := a.cs.Header()
	if md != nil && !committed {
		s.commit()
		s.record(a, nil)
	}
	return md, err
}

// Trailer returns the trailer of the current attempt.
func (s *stream) Trailer() metadata.MD {
	a, _ := s.current()
	return a.cs.Trailer()
}

// Context returns the context of the current attempt.
func (s *stream) Context() context.Context {
	a, _ := s.current()
	return a.cs.Context()
}
