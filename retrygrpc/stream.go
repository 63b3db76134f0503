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
// p.AttemptTimeout does not apply to streams (their length is the
// application's): bound them with the context.
//
// grpc-previous-rpc-attempts counts the attempts sent, as on unary calls:
// an attempt that the Throttle rejected was never sent and is not counted,
// and a value in the caller's outgoing metadata is dropped, on the methods
// that WithMethods leaves out too. A "do not retry" pushback, or a server
// wait beyond WithMaxServerDelay, on the first failure (of opening the
// stream or of RecvMsg) gives a *retry.Error, as on unary calls, so that
// enclosing retry loops do not retry it either. A stream whose context has
// already ended is opened once, as without the interceptor, and grpc-go's
// error returned unchanged. A stream that the caller's context ends after
// a failure that is retried (in the wait before a retry, or before it
// began) fails, in NewStream or RecvMsg, as a unary call does: with an
// error that matches the context's, whose status is CANCELLED or
// DEADLINE_EXCEEDED, wrapping the *retry.Error.
//
// The loop is retry.Do's, started at the first failure with that failure
// as its first attempt: MaxAttempts and MaxElapsed count from the start of
// the stream (so does the Elapsed of the Observer's events and of the
// *retry.Error with MaxElapsed, as in retry.Do; without it, from the first
// failure; the Logger's elapsed always counts from the first failure), and
// Budget, the nesting rule and the Observer apply (the
// Observer hears of a stream only when an attempt fails with an error
// that is retried or refused; the Budget counts every first attempt once,
// as retry.Do does: through that loop, or, for a stream that does not
// enter it, when the stream commits or its first attempt fails). The
// Throttle is asked before each attempt and told each attempt's outcome,
// judged as retry.Do judges it (ThrottleConfig.Accepted when set, the
// overload codes when not; grpc-go's own RESOURCE_EXHAUSTED for a message
// over grpc.MaxCallSendMsgSize is no overload); an attempt that it
// rejects reaches the Observer as EventThrottled and is not counted by
// the Budget, as in retry.Do. When opening the stream failed and was
// retried, and the stream then fails again before committing (in
// RecvMsg), a second retry.Do continues with the attempts and time left:
// the Observer sees its attempts numbered from 1 again and the Budget
// counts one more first attempt. A stream that commits during the wait
// before a retry ends the loop without sending that retry, but retry.Do
// has already taken it from the Budget (a retry granted and not sent
// still counts) and, once the wait ends, announces it to the Observer as
// EventAttempt (asking the Throttle, when set, first) and, when an earlier
// retry was sent, counts it in the *retry.Error's Attempts.
func StreamClientInterceptor(p retry.Policy, opts ...Option) grpc.StreamClientInterceptor {
	c := newConfig(opts)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		// The key is the retry layer's on every method it is installed for:
		// a method that is not retried gets a first attempt, which carries
		// none. No allocation when the caller's metadata lacks it.
		actx := withoutPrevious(ctx)
		if !c.retriesMethod(method) {
			return streamer(actx, desc, cc, method, callOpts...)
		}
		if err := p.Validate(); err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			// Ended before the first attempt: as without the interceptor,
			// and as UnaryClientInterceptor does, grpc-go's error
			// unchanged (no Throttle, Budget or Observer sees it).
			return streamer(actx, desc, cc, method, callOpts...)
		}
		s := &stream{
			ctx: ctx, actx: actx, c: c, p: p, desc: desc, cc: cc, method: method,
			streamer: streamer, opts: callOpts, start: time.Now(), attempts: 1,
		}
		s.cond.L = &s.mu
		var (
			err       error
			throttled bool
		)
		if t := p.Throttle; t != nil && !t.Allow() {
			err, throttled = retry.ErrThrottled, true // not sent: not counted by the next HeaderPreviousAttempts
		} else if err = s.open(actx, &s.first); err != nil && !retriedCode(err) {
			// Not retried, and nothing for enclosing layers to learn:
			// grpc-go's error unchanged. An error that the server's answer
			// refused goes through episode, as in recv, and comes back as
			// a *retry.Error; so does one after which the caller's context
			// ended (the loop reports that end).
			s.mu.Lock()
			s.countFirstLocked()
			s.mu.Unlock()
			return nil, original(err)
		}
		s.cur = &s.first
		if err != nil {
			a, err := s.episode(err, throttled, nil)
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
// Lock discipline. The fields above mu, but for attempts and previous,
// are set by NewStream before it returns s and only read after (by any
// goroutine, without a lock). attempts and previous belong to the
// goroutine that retries, without a lock: the NewStream goroutine until
// NewStream returns s, then the goroutine in RecvMsg (NewStream's return
// happens before any RecvMsg, and grpc-go's ClientStream contract forbids
// concurrent RecvMsg calls). The fields below mu are guarded by mu, with
// the exceptions noted. No lock is held across a call into the stream
// below (SendMsg, RecvMsg, Header, CloseSend, opening one).
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
	start    time.Time
	attempts int // attempts made, sent or rejected by the Throttle; owned by the goroutine that retries (see above)
	previous int // attempts sent to the server, for HeaderPreviousAttempts; idem

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
	sending    bool
	replaying  bool // replay is sending the buffer on cur
	budgeted   bool // the first attempt was counted by the Budget (or by a retry.Do of episode)
	buf        []proto.Message
	bufSize    int
	sendClosed bool
}

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
				once.SetFleet(0, 1<<40) // let every later attempt through: t decides
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

// rejectOnce returns a Throttle that rejects every attempt until its
// fleet counts are changed (episode then lets every attempt through).
func rejectOnce() *retry.Throttle {
	th, err := retry.NewThrottle(retry.ThrottleConfig{})
	if err != nil {
		panic(err) // unreachable: the zero config is valid
	}
	th.SetFleet(1<<60, 0) // rejection probability 1
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

// commitLocked ends retrying. Precondition: s.mu is held.
func (s *stream) commitLocked() {
	s.committed = true
	s.buf, s.bufSize = nil, 0
	s.countFirstLocked()
}

// current returns the current attempt and whether the stream committed.
func (s *stream) current() (*attempt, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.committed
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
		s.commit()
		return err
	}
	if s.settle() {
		// A concurrent SendMsg failed on the client and committed.
		return err
	}
	// Retryable, or refused by the server: the loop retries the one and
	// returns the other as a *retry.Error, for enclosing retry layers (and
	// reports a context that has ended since the failure).
	var recvErr error
	_, rerr := s.episode(ferr, false, func(a *attempt) error {
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

func (s *stream) commit() {
	s.mu.Lock()
	s.commitLocked()
	s.mu.Unlock()
}
