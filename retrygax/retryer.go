package retrygax

import (
	"context"
	"math"
	"time"

	"github.com/googleapis/gax-go/v2"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/serverwait"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// WithPolicy returns a gax.CallOption that makes retrykit the retry layer
// of a generated Google Cloud client method: like gax.WithRetry, it sets
// the call's Retryer, built fresh for each call from p, so that one
// option serves any number of calls at once.
//
// Retried: gRPC UNAVAILABLE and RESOURCE_EXHAUSTED (WithCodes replaces
// them), and REST errors (*googleapi.Error, also inside an
// *apierror.APIError) whose status retryhttp.DefaultRetryStatus accepts:
// 408, 429 and 5xx except 501, 505 and 511 (WithRetryStatus replaces the
// rule). A gRPC attempt that received response headers is not retried
// (gRFC A6's commit rule: the server's application answered, and a
// response larger than grpc.MaxCallRecvMsgSize fails with
// RESOURCE_EXHAUSTED after the method ran); WithPolicy adds grpc.Header to
// the call's gRPC options to see them, so put any gax.WithGRPCOptions
// before it, since gax replaces the gRPC options. grpc-go's own
// RESOURCE_EXHAUSTED for a request over grpc.MaxCallSendMsgSize, raised on
// the client before sending, is not retried either: every attempt would
// repeat it. Other errors, including network errors that gax reports without
// a status, end the call, as gax's own Retryers do. A google.rpc.RetryInfo
// detail (either transport) and a REST Retry-After header set the least
// wait, capped (WithMaxServerWait) and jittered as in retryhttp. An
// error that a lower retrykit layer already gave up on (a *retry.Error, or
// a REST response carrying retryhttp.HeaderExhausted) is not retried
// unless p.RetryExhausted. retrygrpc's interceptors also return a
// *retry.Error, after one attempt, when the server's answer refused a
// retry: a grpc-retry-pushback-ms trailer saying "do not retry", which
// WithPolicy does not read, or response headers.
//
// Replace, do not add to, the client's own retry settings, method by
// method, so that exactly one layer retries:
//
//	c.CallOptions.GetInstance = []gax.CallOption{retrygax.WithPolicy(p)}
//
// (WithPolicy replaces any earlier gax.WithRetry in the list, since the
// last Retry setting wins; keeping the generated gax.WithTimeout is fine.)
//
// What gax lets a Retryer see, and so what applies: p's waits (Initial,
// Multiplier, MaxDelay, Jitter), MaxAttempts, MaxElapsed (counted from the
// start of the call), Retryable (consulted after the rules above, which it
// cannot widen), Budget (each call counts as a first attempt, each retry
// asks the budget) and Throttle (asked before each retry; a rejected retry
// costs an attempt and a wait, as in retry.Do, without a request, the wait
// being added to the next granted one; when the Throttle rejects every
// attempt left, the call ends at once, without those waits, as gax cannot
// be told to wait and then stop: the EventDone's Waited leaves them out,
// although the EventThrottled before it counted them). A
// Retryer gets no context: a wait that would pass the context's deadline
// is not refused in advance (gax's sleep ends at the deadline and gax
// returns the context's error), and AttemptTimeout is not applied (use
// gax.WithTimeout). When it gives up, gax returns the last error
// unchanged, not a *retry.Error. Logger is not used.
//
// Observer: told EventAttempt, EventRetry, EventThrottled,
// EventBudgetRefused and EventDone (with the *retry.Error it would have
// returned) as retry.Do tells them, with context.Background(); EventAttempt
// of a retry is reported when the retry is granted, before its wait. A
// successful end (EventDone with a nil Err) and each attempt's outcome for
// the Throttle (judged as retry.Do judges it: by ThrottleConfig.Accepted
// when set, otherwise UNAVAILABLE, RESOURCE_EXHAUSTED and
// DEADLINE_EXCEEDED are rejections) are reported through grpc.OnFinish,
// which this option adds to the call's gRPC options when p has an
// Observer or a Throttle: on a REST transport, and when a later
// gax.WithGRPCOptions replaces the gRPC options, they are not seen (put
// the Throttle on the REST client's HTTP transport instead: a
// retryhttp.Transport with MaxAttempts 1).
//
// An attempt that ended with the call's context, and is not retried (the
// context's error over REST; over gRPC, CANCELLED or DEADLINE_EXCEEDED,
// which a Retryer cannot tell from a server's own), gives up with
// ReasonContext and the context error as Cause, as in retry.Do; so does
// the error of a lower retrykit loop that the context ended (a
// *retry.Error with ReasonContext: retrygrpc's interceptors give one when
// the context ends in their wait), which is not retried either. A
// context that had ended before the call still counts the first attempt
// with the Budget and tells the Observer EventAttempt: WithPolicy is
// applied before gax looks at the context. Without MaxElapsed, Elapsed is
// measured from the first failure, as retry.Do measures Error.Elapsed.
//
// A Retryer gets no context either: when the context ends during gax's
// wait, gax returns its error without asking the Retryer again, so the
// Observer gets no EventDone for that call (its last event is the
// EventAttempt of the retry that was granted and not sent), and the
// Budget's retry, granted, stays withdrawn. gax also returns an error that
// mentions an unknown certificate authority without asking the Retryer:
// no EventDone either.
//
// Several WithPolicy options in one call (the client's default and a
// per-call override, c.GetInstance(ctx, req, retrygax.WithPolicy(p2))):
// the last one governs the call, as gax's last Retry setting does, and
// only its Throttle and Observer are told the call's outcomes. The first
// attempt is counted when an option is resolved, before gax knows which one
// wins: an earlier option has already counted it with its Budget and told
// its Observer EventAttempt, so a later one with the same Budget, or an
// Observer equal to the earlier one's (a pointer, not an ObserverFunc,
// which Go cannot compare), does not count or tell it again. Put no
// gax.WithRetry after WithPolicy: WithPolicy cannot see that it was
// replaced, and would feed its Throttle and Observer for a call it does not
// govern.
//
// An invalid p (see p.Validate) retries nothing, and replaces an earlier
// WithPolicy like a valid one.
func WithPolicy(p retry.Policy, opts ...Option) gax.CallOption {
	o := &policyOption{p: p, c: newConfig(opts), valid: p.Validate() == nil}
	o.maxAttempts = p.MaxAttempts
	if o.maxAttempts == 0 {
		o.maxAttempts = retry.DefaultMaxAttempts
	}
	return o
}

type policyOption struct {
	p           retry.Policy
	c           config
	valid       bool
	maxAttempts int
}

// Resolve sets the call's Retryer. gax calls it once per call, before the
// first attempt.
func (o *policyOption) Resolve(s *gax.CallSettings) {
	// An earlier WithPolicy in this call (the client's default, before a
	// per-call option) no longer governs it: it must stop feeding its
	// Throttle and Observer, which its grpc.OnFinish would still do.
	var prev *retryer
	for _, g := range s.GRPC {
		if m, ok := g.(policyMark); ok {
			prev = m.r
		}
	}
	if prev != nil {
		prev.superseded = true
	}
	if !o.valid {
		s.Retry = nil
		return
	}
	p := &o.p
	if p.Budget != nil && (prev == nil || prev.o.p.Budget != p.Budget) {
		p.Budget.RecordAttempt()
	}
	if p.Observer != nil && (prev == nil || !sameObserver(prev.o.p.Observer, p.Observer)) {
		p.Observer.Observe(context.Background(), retry.Event{Kind: retry.EventAttempt, Attempt: 1, MaxAttempts: o.maxAttempts})
	}
	r := &retryer{o: o, n: 1}
	if p.MaxElapsed > 0 {
		r.start = time.Now() // else from the first failure, as retry.Do measures Error.Elapsed
	}
	s.Retry = func() gax.Retryer { return r }
	// The gRPC attempt's response headers, if any arrived, commit the call
	// (gRFC A6): see Retry. A REST call ignores the gRPC options.
	grpcOpts := append(s.GRPC[:len(s.GRPC):len(s.GRPC)], grpc.Header(&r.header), policyMark{r: r})
	if p.Throttle != nil || p.Observer != nil {
		grpcOpts = append(grpcOpts, grpc.OnFinish(r.finish))
	}
	s.GRPC = grpcOpts
}

// policyMark marks, among a call's gRPC options, the retryer that a
// WithPolicy set, so that a later WithPolicy in the same call can find and
// supersede it. It changes nothing in the call.
type policyMark struct {
	grpc.EmptyCallOption
	r *retryer
}

// sameObserver reports whether a and b are the same Observer; one that Go
// cannot compare (an ObserverFunc, retry.Observers' list) never is.
func sameObserver(a, b retry.Observer) (same bool) {
	defer func() { _ = recover() }() // comparing uncomparable dynamic types panics
	return a != nil && a == b
}

// retryer is the state of one call.
type retryer struct {
	o      *policyOption
	header metadata.MD   // the last gRPC attempt's response headers (grpc.Header), nil if none arrived
	n      int           // attempts made (sent or throttled)
	prev   time.Duration // the previous computed wait
	waited time.Duration // total of the waits granted
	start  time.Time     // start of the call, or of the first failure
	// superseded: a later WithPolicy in the same call governs it (set
	// while gax resolves the options, before any attempt).
	superseded bool
}

// finish is told each gRPC attempt's outcome (grpc.OnFinish).
func (r *retryer) finish(err error) {
	if r.superseded {
		return
	}
	p := &r.o.p
	if p.Throttle != nil {
		recordThrottle(p.Throttle, err)
	}
	if err == nil && p.Observer != nil {
		p.Observer.Observe(context.Background(), retry.Event{Kind: retry.EventDone, Attempt: r.n, MaxAttempts: r.o.maxAttempts, Waited: r.waited})
	}
}

// Retry implements gax.Retryer: it is called after each failed attempt.
func (r *retryer) Retry(err error) (time.Duration, bool) {
	o, p := r.o, &r.o.p
	now := time.Now()
	if r.start.IsZero() {
		r.start = now // as retry.Error.Elapsed without MaxElapsed
	}
	elapsed := now.Sub(r.start)
	v := o.c.judge(err, now)
	committed := r.header != nil
	r.header = nil // grpc-go sets it only for an attempt that opened a stream
	switch {
	case v.exhausted && !p.RetryExhausted:
		if cause := endedByContext(err); cause != nil {
			// A lower loop that the call's context ended (retrygrpc's
			// interceptors in their wait, say): as retry.Do, which looks at
			// the context before the nesting rule, report the context.
			return r.giveUpCause(err, retry.ReasonContext, cause, elapsed)
		}
		return r.giveUp(err, retry.ReasonExhausted, elapsed)
	case !v.retry:
		if cause := contextCause(err); cause != nil {
			return r.giveUpCause(err, retry.ReasonContext, cause, elapsed)
		}
		return r.giveUp(err, retry.ReasonPermanent, elapsed)
	case committed:
		// The server's application answered with headers: the call may
		// have been applied, and the error may be the client's own (a
		// response over grpc.MaxCallRecvMsgSize gives RESOURCE_EXHAUSTED
		// after the method ran). gRFC A6 commits such a call.
		return r.giveUp(err, retry.ReasonPermanent, elapsed)
	case p.Retryable != nil && !p.Retryable(err):
		return r.giveUp(err, retry.ReasonPermanent, elapsed)
	}
	var hint time.Duration
	if v.hasHint && o.c.maxServerDelay >= 0 {
		// A hint beyond what a Duration holds (saturated by the parsers) is
		// more than any cap, MaxInt64 included.
		if v.hint > o.c.maxServerDelay || v.hint == math.MaxInt64 {
			return r.giveUp(err, retry.ReasonPermanent, elapsed)
		}
		hint = serverwait.Jitter(v.hint)
	}
	var total time.Duration // waits granted by this call of Retry
	made := err             // the error of the attempt that was sent
	for {
		if err == retry.ErrThrottled {
			// The Throttle rejected the retries after an attempt that was
			// made: as retry.Do, keep that attempt's error, which says
			// what the backend answered, beside ErrThrottled.
			err = &throttledError{made: made}
		}
		if o.maxAttempts != retry.Unlimited && r.n >= o.maxAttempts {
			return r.giveUp(err, retry.ReasonAttempts, elapsed)
		}
		d := p.Delay(r.n-1, r.prev, nil)
		r.prev = d
		if total == 0 && hint > d {
			d = hint
		}
		if p.MaxElapsed > 0 && d >= p.MaxElapsed-elapsed-total { // as retry.Do: no time left
			return r.giveUp(err, retry.ReasonTimeBudget, elapsed)
		}
		if p.Budget != nil && !p.Budget.AllowRetry() {
			r.emit(retry.Event{Kind: retry.EventBudgetRefused, Attempt: r.n, Err: eventErr(err), Waited: addSat(r.waited, total), Elapsed: elapsed})
			return r.giveUp(err, retry.ReasonBudget, elapsed)
		}
		r.emit(retry.Event{Kind: retry.EventRetry, Attempt: r.n, Err: eventErr(err), Delay: d, Waited: addSat(r.waited, total), Elapsed: elapsed})
		total = addSat(total, d)
		r.n++
		if p.Throttle == nil || p.Throttle.Allow() {
			break
		}
		// Rejected locally: the attempt counts, nothing is sent, and the
		// loop goes on as after any failure.
		err = retry.ErrThrottled
		r.emit(retry.Event{Kind: retry.EventThrottled, Attempt: r.n, Err: err, Waited: addSat(r.waited, total)})
	}
	r.waited = addSat(r.waited, total)
	r.emit(retry.Event{Kind: retry.EventAttempt, Attempt: r.n, Waited: r.waited})
	return total, true
}

// throttledError is the last error of a call whose last retries the
// Throttle rejected after an attempt that was made and failed with made,
// as retry.Do reports it: it matches both retry.ErrThrottled and made.
type throttledError struct{ made error }

func (e *throttledError) Error() string {
	return retry.ErrThrottled.Error() + ", after: " + e.made.Error()
}

func (e *throttledError) Unwrap() []error { return []error{retry.ErrThrottled, e.made} }

// eventErr is the Err of an EventRetry or EventBudgetRefused: retry.Do
// reports a rejected attempt's error there as retry.ErrThrottled itself.
func eventErr(err error) error {
	if _, ok := err.(*throttledError); ok {
		return retry.ErrThrottled
	}
	return err
}

func (r *retryer) giveUp(err error, reason retry.Reason, elapsed time.Duration) (time.Duration, bool) {
	return r.giveUpCause(err, reason, nil, elapsed)
}

// giveUpCause is giveUp with the context error that ended the call, for
// ReasonContext.
func (r *retryer) giveUpCause(err error, reason retry.Reason, cause error, elapsed time.Duration) (time.Duration, bool) {
	if r.o.p.Observer != nil {
		e := &retry.Error{Attempts: r.n, Elapsed: elapsed, Reason: reason, Err: err, Cause: cause}
		r.emit(retry.Event{Kind: retry.EventDone, Attempt: r.n, Err: e, Reason: reason, Waited: r.waited, Elapsed: elapsed})
	}
	return 0, false
}

func (r *retryer) emit(e retry.Event) {
	if obs := r.o.p.Observer; obs != nil {
		e.MaxAttempts = r.o.maxAttempts
		obs.Observe(context.Background(), e)
	}
}

// recordThrottle tells t the outcome of a gRPC attempt, err being grpc's
// error for it, by the rule retry.Do applies: a nil err is accepted;
// otherwise t's ThrottleConfig.Accepted decides when set, and the default
// rule when not: UNAVAILABLE, RESOURCE_EXHAUSTED and DEADLINE_EXCEEDED are
// overload (retry.Do's rule sees the same through retrygrpc's errors).
func recordThrottle(t *retry.Throttle, err error) {
	if err == nil {
		t.Record(true)
		return
	}
	if accepted := t.Config().Accepted; accepted != nil {
		t.Record(accepted(err))
		return
	}
	s := status.Convert(err)
	if sendTooLarge(s) {
		return // never sent: nothing to count, as for a local rejection
	}
	c := s.Code()
	t.Record(!(c == codes.Unavailable || c == codes.ResourceExhausted || c == codes.DeadlineExceeded))
}

func addSat(a, b time.Duration) time.Duration {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}
