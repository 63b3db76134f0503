package retrygax

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/googleapis/gax-go/v2"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/serverwait"
	"google.golang.org/api/googleapi"
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
//	opt, err := retrygax.WithPolicy(p)
//	if err != nil { ... }
//	c.CallOptions.GetInstance = []gax.CallOption{opt}
//
// (WithPolicy replaces any earlier gax.WithRetry in the list, since the
// last Retry setting wins; keeping the generated gax.WithTimeout is fine.)
//
// The Retryer is a retry.Loop: p's waits, stop rules, Budget, Throttle,
// Observer and Logger apply as in retry.Do, except where gax hides what
// they need. p.Retryable, when set, replaces the status rule above
// (WithCodes, WithRetryStatus); the commit rule, the nesting rule, a
// server's wait over the cap and a context's end still stop the call. The
// Throttle is not asked before the first attempt, which gax sends before
// any Retryer exists, only before each retry, and before gax's wait. A
// rejected retry costs an attempt and a wait, as in retry.Do, without a
// request. With a MaxElapsed or a finite MaxAttempts, that wait is added
// to the one gax sleeps next, each wait starting where the one before
// ends, so the sum never reaches past MaxElapsed; when the Throttle
// rejects every attempt left, the call ends at once, and the EventDone's
// Waited counts the waits gax did not sleep. With Unlimited attempts and
// no MaxElapsed, nothing would end that sum: the Retryer sleeps each such
// wait itself, which the call's context cannot cut short (set a
// MaxElapsed to leave every wait to gax). A Retryer gets no context: a
// wait that would pass the context's deadline is not refused in advance
// (gax's sleep ends at the deadline and gax returns the context's error),
// and the Observer and Logger get context.Background(). When it gives up, gax returns the
// last error unchanged, not a *retry.Error.
//
// Observer: told EventAttempt, EventRetry, EventThrottled,
// EventBudgetRefused and EventDone (with the *retry.Error it would have
// returned) as retry.Do tells them; EventAttempt
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
// per-call override, c.GetInstance(ctx, req, opt2)):
// the last one governs the call, as gax's last Retry setting does, and
// only its Throttle and Observer are told the call's outcomes. The first
// attempt is counted when an option is resolved, before gax knows which one
// wins: an earlier option has already counted it with its Budget and told
// its Observer EventAttempt, so a later one with the same Budget and an
// Observer equal to the earlier one's (a pointer, not an ObserverFunc,
// which Go cannot compare) does not count or tell it again. Put no
// gax.WithRetry after WithPolicy: WithPolicy cannot see that it was
// replaced, and would feed its Throttle and Observer for a call it does not
// govern.
//
// WithPolicy refuses, with an error naming the field, an invalid p (the
// error of p.Validate) and a p with an AttemptTimeout, which a Retryer
// cannot apply (gax makes each attempt; bound the call with
// gax.WithTimeout or its context). docs/engine.md has the table of what
// each module does with each Policy field.
func WithPolicy(p retry.Policy, opts ...Option) (gax.CallOption, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("retrygax: WithPolicy: %w", err)
	}
	if p.AttemptTimeout != 0 {
		return nil, fmt.Errorf("retrygax: WithPolicy: Policy.AttemptTimeout %v cannot be applied: gax makes each attempt, and a Retryer cannot bound it; use gax.WithTimeout or the call's context", p.AttemptTimeout)
	}
	return &policyOption{p: p, c: newConfig(opts)}, nil
}

type policyOption struct {
	p retry.Policy
	c config
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
	p := &o.p
	r := &retryer{o: o, l: p.Loop()}
	// gax sends the first attempt before any Retryer exists: it cannot be
	// held back, so the Throttle is not asked. An earlier option with the
	// same Budget and Observer has counted and told it already.
	if prev == nil || prev.o.p.Budget != p.Budget || !sameObserver(prev.o.p.Observer, p.Observer) {
		r.l.Sent(context.Background())
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

// retryer is the state of one call: its retry.Loop, and what gax shows
// of each attempt.
type retryer struct {
	o      *policyOption
	l      retry.Loop
	header metadata.MD // the last gRPC attempt's response headers (grpc.Header), nil if none arrived
	// seen: grpc.OnFinish told the current attempt's outcome (a REST
	// attempt's never is, nor is a REST success: the Throttle is told
	// neither).
	seen bool
	// superseded: a later WithPolicy in the same call governs it (set
	// while gax resolves the options, before any attempt).
	superseded bool
}

// finish is told each gRPC attempt's outcome (grpc.OnFinish).
func (r *retryer) finish(err error) {
	if r.superseded {
		return
	}
	r.seen = true
	switch {
	case err == nil:
		r.l.Succeeded(context.Background())
	case sendTooLarge(status.Convert(err)):
		r.l.Unseen() // never sent: nothing to count, as for a local rejection
	default:
		r.l.Record(overloadMark{err})
	}
}

// Retry implements gax.Retryer: it is called after each failed attempt,
// and returns the wait that gax then sleeps, which covers the waits before
// any retries the Throttle rejected on the way.
func (r *retryer) Retry(err error) (time.Duration, bool) {
	bg := context.Background() // a Retryer gets no context
	if err == nil {
		err = errNoError // gax never does this; a caller of the Retryer might
	}
	if !r.seen {
		r.l.Unseen()
	}
	r.seen = false
	o, p := r.o, &r.o.p
	v := o.c.judge(err, time.Now())
	committed := r.header != nil
	r.header = nil // grpc-go sets it only for an attempt that opened a stream
	switch {
	case v.exhausted && !p.RetryExhausted:
		if cause := endedByContext(err); cause != nil {
			// A lower loop that the call's context ended (retrygrpc's
			// interceptors in their wait, say): as retry.Do, which looks at
			// the context before the nesting rule, report the context.
			r.l.Ended(bg, err, cause)
			return 0, false
		}
		err = exhaustedMark{err} // a REST response's Retry-Exhausted says so
	case !v.retry && contextCause(err) != nil:
		// The call's context ended, as far as a Retryer can tell: as
		// retry.Do, which looks at the context before Retryable.
		r.l.Ended(bg, err, contextCause(err))
		return 0, false
	case !v.retry && p.Retryable == nil:
		err = retry.Permanent(err) // Retryable, when set, replaces the code rule
	case committed:
		// The server's application answered with headers: the call may
		// have been applied, and the error may be the client's own (a
		// response over grpc.MaxCallRecvMsgSize gives RESOURCE_EXHAUSTED
		// after the method ran). gRFC A6 commits such a call.
		err = retry.Permanent(err)
	case v.hasHint && o.c.maxServerWait >= 0:
		// A hint beyond what a Duration holds (saturated by the parsers) is
		// more than any cap, MaxInt64 included.
		if serverwait.Beyond(v.hint, o.c.maxServerWait) {
			err = retry.Permanent(err)
		} else {
			err = retry.ServerWait(err, serverwait.Jitter(v.hint))
		}
	}
	d, stop := r.l.Failed(bg, err)
	if stop != nil {
		return 0, false
	}
	// A stop rule that ends the rejected retries without time passing:
	// the Loop judges each wait from the end of the ones granted before.
	bounded := p.MaxElapsed > 0 || p.MaxAttempts != retry.Unlimited
	for {
		// The retry is granted before gax's wait, so that a retry the
		// Throttle rejects costs its attempt and the next wait, as in
		// retry.Do, without a request.
		_, terr := r.l.Begin(bg)
		if terr == nil {
			return d, true
		}
		w, stop := r.l.Failed(bg, terr)
		if stop != nil {
			return 0, false
		}
		if bounded {
			d = serverwait.AddSat(d, w) // gax sleeps it, under the call's context
		} else {
			// Nothing would end the sum while the Throttle rejects: wait
			// here, so that time passes before it is asked again, as in
			// retry.Do. bg never ends: Wait cannot fail.
			r.l.Wait(bg)
		}
	}
}

// errNoError stands for the nil error of a Retry called without one.
var errNoError = errors.New("retrygax: Retry called with a nil error")

// overloadMark is an attempt's error as the Throttle's default rule reads
// it: gRPC's UNAVAILABLE, RESOURCE_EXHAUSTED and DEADLINE_EXCEEDED are
// overload (retry.Do's rule sees the same through retrygrpc's errors).
type overloadMark struct{ err error }

func (e overloadMark) Error() string { return e.err.Error() }
func (e overloadMark) Unwrap() error { return e.err }

// Overloaded reports whether the attempt's gRPC status says overload.
func (e overloadMark) Overloaded() bool {
	var gerr *googleapi.Error
	if errors.As(e.err, &gerr) {
		return false // REST: its status maps to a gRPC code, not a gRPC answer
	}
	switch status.Code(e.err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded:
		return true
	}
	return false
}

// exhaustedMark is the error of a REST response that a lower retrykit
// layer marked with retryhttp.HeaderExhausted: it reports retry.IsExhausted.
type exhaustedMark struct{ err error }

func (e exhaustedMark) Error() string   { return e.err.Error() }
func (e exhaustedMark) Unwrap() error   { return e.err }
func (e exhaustedMark) Exhausted() bool { return true }
