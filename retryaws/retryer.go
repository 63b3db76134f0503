package retryaws

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awsretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	smithymiddle "github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/serverwait"
)

// Retryer is an aws.RetryerV2 that makes a retry.Policy the one retry
// layer of AWS SDK for Go v2 clients. Get one with New; plug it in with
// config.WithRetryer, a client's Options.Retryer, or per operation:
//
//	cfg, err := config.LoadDefaultConfig(ctx, config.WithRetryer(func() aws.Retryer { return r }))
//	db := dynamodb.NewFromConfig(cfg)                        // every call of every client
//	s3c := s3.New(s3.Options{Retryer: r /* ... */})          // one client
//	db.GetItem(ctx, in, func(o *dynamodb.Options) { o.Retryer = r }) // one call
//
// A Retryer is safe for concurrent use and may serve any number of
// clients; it holds no per-call state between calls. The zero Retryer is
// ready to use and is New(retry.Policy{}): the reference schedule (1 s,
// 2 s, 4 s, … plus up to 1 s, 10 attempts). A Retryer must not be copied
// after first use. See the package documentation for what it does with
// each SDK hook.
type Retryer struct {
	p retry.Policy
	c config

	mu     sync.Mutex
	parked map[any]*call // calls whose last attempt failed, by its error, until GetRetryToken
}

var _ aws.RetryerV2 = (*Retryer)(nil)

// New returns a Retryer that retries as p says, or p.Validate's error, or
// the error of an option given a bad value.
// With no options it retries what the SDK's standard retryer retries,
// repeats after a lost reply only what Safety (or MarkSafe) says is safe,
// and honours x-amz-retry-after up to DefaultMaxServerWait.
func New(p retry.Policy, opts ...Option) (*Retryer, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	c := newConfig(opts)
	if c.err != nil {
		return nil, c.err
	}
	return &Retryer{p: p, c: c}, nil
}

// maxAttempts is the policy's attempt limit, its default resolved.
func (r *Retryer) maxAttempts() int {
	if r.p.MaxAttempts == 0 {
		return retry.DefaultMaxAttempts
	}
	return r.p.MaxAttempts
}

// MaxAttempts returns 0, which the SDK's retry loop reads as "no limit of
// its own": the policy's MaxAttempts is applied by GetRetryToken, so that a
// call that used up its attempts ends with retrykit's error (see
// retry.IsExhausted) rather than the SDK's MaxAttemptsError. The
// Amz-Sdk-Request header then carries no max=.
func (r *Retryer) MaxAttempts() int { return 0 }

// IsErrorRetryable returns true for every error, so that the SDK asks
// GetRetryToken after each failed attempt, and GetRetryToken decides
// (returning the reason as an error when it does not retry).
func (r *Retryer) IsErrorRetryable(error) bool { return true }

// RetryDelay returns -(5 s + 1 ns): GetRetryToken has already waited the
// policy's wait, and the SDK's own adjustment for x-amz-retry-after, which
// clamps the header's value to [delay, delay + 5 s], then yields a
// negative wait, which is none.
func (r *Retryer) RetryDelay(int, error) (time.Duration, error) {
	return noDelay, nil
}

const noDelay = -(5*time.Second + 1)

// GetInitialToken is the deprecated form of GetAttemptToken, which the SDK
// calls instead; it returns a release function that does nothing.
func (r *Retryer) GetInitialToken() func(error) error { return nopRelease }

func nopRelease(error) error { return nil }

// GetAttemptToken is called by the SDK before each attempt. For the first
// attempt of a call it refuses a client whose attempt limit the SDK
// overrides (ErrMaxAttemptsOverride), asks the Throttle (a rejected first
// attempt waits and asks again as in retry.Do, until the Throttle lets one
// through or a stop rule ends the call; the attempts then sent are
// retries, which earn the Budget nothing), counts a first attempt it let
// through with the policy's Budget, and tells the Observer EventAttempt.
// Retries were accounted by GetRetryToken.
func (r *Retryer) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	if r == nil {
		return nil, errNilRetryer{}
	}
	attempt, limit := sdkAttempt(ctx)
	if attempt > 1 {
		return nopRelease, nil
	}
	if limit != 0 {
		return nil, &overrideError{max: limit}
	}
	c := r.newCall(ctx)
	c.sdkN = 1
	p := &r.p
	if p.MaxElapsed > 0 {
		c.start = time.Now()
	}
	if p.Throttle != nil && !p.Throttle.Allow() {
		// As in retry.Do, the attempts sent after a rejected first one are
		// retries, granted by the Budget: the call earns it nothing.
		c.emit(ctx, retry.Event{Kind: retry.EventThrottled, Attempt: 1, Err: retry.ErrThrottled})
		if err := c.retry(ctx, retry.ErrThrottled, verdict{retry: true}); err != nil {
			return nil, err
		}
		return c.release, nil
	}
	if p.Budget != nil {
		p.Budget.RecordAttempt()
	}
	c.emit(ctx, retry.Event{Kind: retry.EventAttempt, Attempt: 1})
	return c.release, nil
}

// GetRetryToken is called by the SDK after each failed attempt: it decides
// whether to retry, as retry.Do decides, and if so waits (honouring the
// context), asks the Throttle and returns; otherwise it returns the error
// that the SDK joins to the attempt's (see the package documentation).
func (r *Retryer) GetRetryToken(ctx context.Context, opErr error) (func(error) error, error) {
	if r == nil {
		return nil, errNilRetryer{}
	}
	k := r.newCall(ctx) // what the context says of the call: its key in r.parked
	k.sdkN, _ = sdkAttempt(ctx)
	c := r.unpark(opErr, k)
	if c == nil {
		// Called outside the SDK's loop, or the attempt's state was not
		// kept (see park): decide with what the SDK says of the attempt.
		c = k
		c.n = max(c.sdkN, 1)
	}
	if err := c.decide(ctx, opErr); err != nil {
		return nil, err
	}
	c.sdkN++
	return c.release, nil
}

// call is the state of one call of an operation, from its first attempt
// to its end. It travels with the release functions the SDK is handed, and
// between a failed attempt and the SDK's GetRetryToken in r.parked.
type call struct {
	r         *Retryer
	service   string // the SDK's service ID
	operation string
	class     Class
	marked    bool          // MarkSafe
	maybe     bool          // an attempt may have been applied (see judge)
	sdkN      int           // the SDK's number of the attempt being made
	n         int           // attempts made (sent or rejected by the Throttle)
	prev      time.Duration // the previous computed wait
	waited    time.Duration // total of the waits
	start     time.Time     // start of the call (MaxElapsed) or of the first failure
	lostAt    time.Time     // the first failure that may have been applied
	nextInMap *call         // another call parked under the same error value
}

func (r *Retryer) newCall(ctx context.Context) *call {
	c := &call{r: r, n: 1, service: awsmiddle.GetServiceID(ctx), operation: awsmiddle.GetOperationName(ctx)}
	c.class = r.c.class(c.service, c.operation)
	c.marked = markedSafe(ctx)
	return c
}

// release is told the outcome of an attempt of c: the SDK calls it after
// the attempt (as the first attempt's attempt token, then as the retry
// token of each retry).
func (c *call) release(err error) error {
	p := &c.r.p
	if p.Throttle != nil {
		recordThrottle(p.Throttle, err)
	}
	if err == nil {
		if p.Observer != nil {
			p.Observer.Observe(context.Background(), retry.Event{Kind: retry.EventDone, Attempt: c.n, MaxAttempts: c.r.maxAttempts(), Waited: c.waited})
		}
		return nil
	}
	c.r.park(err, c)
	return nil
}

// maxParked bounds r.parked: a wrapper around the Retryer whose
// IsErrorRetryable says false without asking it keeps the SDK from calling
// GetRetryToken, and the calls it ended would stay parked.
const maxParked = 1 << 14

// park keeps c until GetRetryToken is called with err. The SDK calls
// release and GetRetryToken one after the other on the goroutine of the
// call, with the same error value (GetRetryToken's possibly wrapped by the
// SDK's clock-skew error), so the error's identity finds the call again.
// An error value that cannot be a map key is kept under unhashable{}, and
// found again by the call's marks alone (see unpark).
func (r *Retryer) park(err error, c *call) {
	var key any = err
	if !hashable(reflect.ValueOf(err)) {
		key = unhashable{}
	}
	r.mu.Lock()
	if r.parked == nil {
		r.parked = make(map[any]*call)
	}
	if len(r.parked) >= maxParked {
		clear(r.parked)
	}
	c.nextInMap = r.parked[key]
	r.parked[key] = c
	r.mu.Unlock()
}

// unhashable is the key in Retryer.parked of the calls whose error
// cannot be one.
type unhashable struct{}

// unpark returns and forgets the call parked under err, or under an error
// that err wraps, that k (made from GetRetryToken's context) describes:
// the same operation, MarkSafe or not, at the same SDK attempt. Two calls
// that failed with one shared error value are told apart so, as far as
// the SDK lets them be: two calls that match in all of these may exchange
// their counts and waits, never their class.
func (r *Retryer) unpark(err error, k *call) *call {
	r.mu.Lock()
	defer r.mu.Unlock()
	for e, top := err, true; e != nil; e, top = errors.Unwrap(e), false {
		var key any = e
		if !hashable(reflect.ValueOf(e)) {
			if !top {
				continue
			}
			key = unhashable{}
		}
		var prev *call
		for c := r.parked[key]; c != nil; prev, c = c, c.nextInMap {
			if c.service != k.service || c.operation != k.operation || c.marked != k.marked || c.sdkN != k.sdkN {
				continue
			}
			switch {
			case prev != nil:
				prev.nextInMap = c.nextInMap
			case c.nextInMap != nil:
				r.parked[key] = c.nextInMap
			default:
				delete(r.parked, key)
			}
			c.nextInMap = nil
			return c
		}
	}
	return nil
}

// hashable reports whether v can be a map key without a panic: a
// comparable type is not enough when an interface inside holds a slice, a
// map or a function.
func hashable(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Invalid, reflect.Slice, reflect.Map, reflect.Func:
		return false
	case reflect.Interface:
		return v.IsNil() || hashable(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if !hashable(v.Field(i)) {
				return false
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			if !hashable(v.Index(i)) {
				return false
			}
		}
	}
	return true
}

// decide handles the failure of attempt c.n with err, as retry.Do would:
// nil means retry (the wait is over and the next attempt may be sent),
// otherwise the error to return to the SDK.
func (c *call) decide(ctx context.Context, err error) error {
	p := &c.r.p
	now := time.Now()
	if c.start.IsZero() {
		c.start = now
	}
	elapsed := now.Sub(c.start)
	v := judge(err, c.class, c.marked)
	c.maybe = c.maybe || v.maybe
	if v.maybe && c.lostAt.IsZero() {
		c.lostAt = now
	}
	switch {
	case retry.IsExhausted(err) && !p.RetryExhausted:
		return c.stop(ctx, err, retry.ReasonExhausted, elapsed, v.maybe)
	case !v.retry:
		if ctx.Err() != nil {
			return c.stop(ctx, err, retry.ReasonContext, elapsed, v.maybe)
		}
		return c.stop(ctx, err, retry.ReasonPermanent, elapsed, v.maybe)
	case p.Retryable != nil && !p.Retryable(err):
		return c.stop(ctx, err, retry.ReasonPermanent, elapsed, v.maybe)
	case v.hasHint && c.r.c.serverDelayCap() >= 0 && v.hint > c.r.c.serverDelayCap():
		// A server that asks for more than the cap gets its error at once.
		return c.stop(ctx, err, retry.ReasonPermanent, elapsed, v.maybe)
	}
	return c.retry(ctx, err, v)
}

// retry runs the stop rules and waits before the next attempt of c, whose
// last attempt failed with err, as retry.Do does; a Throttle that rejects
// the next attempt makes it count as an attempt, and the loop goes on as
// after any failure.
func (c *call) retry(ctx context.Context, err error, v verdict) error {
	p := &c.r.p
	made := err // the error of the last attempt that was sent
	if made == retry.ErrThrottled {
		made = nil
	}
	var hint time.Duration
	if v.hasHint && c.r.c.serverDelayCap() >= 0 {
		hint = serverwait.Jitter(v.hint)
	}
	if c.start.IsZero() {
		c.start = time.Now() // as retry.Error.Elapsed without MaxElapsed
	}
	elapsed := time.Since(c.start)
	for {
		if err == retry.ErrThrottled && made != nil {
			err = &throttledError{made: made}
		}
		if c.r.maxAttempts() != retry.Unlimited && c.n >= c.r.maxAttempts() {
			return c.stop(ctx, err, retry.ReasonAttempts, elapsed, v.maybe)
		}
		d := p.Delay(c.n-1, c.prev, nil)
		c.prev = d
		if hint > d {
			d, hint = hint, 0
		}
		if p.MaxElapsed > 0 && d >= p.MaxElapsed-elapsed {
			return c.stop(ctx, err, retry.ReasonTimeBudget, elapsed, v.maybe)
		}
		if c.class == Token && !c.marked && !c.lostAt.IsZero() && d >= TokenWindow-time.Since(c.lostAt) {
			// The service would no longer know the token of the attempt
			// that may have been applied.
			return c.stop(ctx, err, retry.ReasonTimeBudget, elapsed, v.maybe)
		}
		if dl, ok := ctx.Deadline(); ok && d > 0 && d >= time.Until(dl) {
			// As retry.Do: a wait that ends at or past the deadline would
			// leave the attempt no time.
			return c.stopCause(ctx, err, retry.ReasonDeadline, context.DeadlineExceeded, elapsed, v.maybe)
		}
		if p.Budget != nil && !p.Budget.AllowRetry() {
			c.emit(ctx, retry.Event{Kind: retry.EventBudgetRefused, Attempt: c.n, Err: eventErr(err), Elapsed: elapsed})
			return c.stop(ctx, err, retry.ReasonBudget, elapsed, v.maybe)
		}
		c.emit(ctx, retry.Event{Kind: retry.EventRetry, Attempt: c.n, Err: eventErr(err), Delay: d, Elapsed: elapsed})
		if slept, werr := sleep(ctx, d); werr != nil {
			c.waited = serverwait.AddSat(c.waited, slept) // as retry.Do: a wait the context cut short counts
			return c.stopCause(ctx, err, retry.ReasonContext, werr, time.Since(c.start), v.maybe)
		}
		c.waited = serverwait.AddSat(c.waited, d)
		c.n++
		if p.Throttle == nil || p.Throttle.Allow() {
			break
		}
		err = retry.ErrThrottled
		c.emit(ctx, retry.Event{Kind: retry.EventThrottled, Attempt: c.n, Err: err})
		elapsed = time.Since(c.start)
	}
	c.emit(ctx, retry.Event{Kind: retry.EventAttempt, Attempt: c.n})
	return nil
}

// sleep waits d or until ctx ends, and then returns how long it waited
// and ctx's error. A context that ends as the wait does counts as ended:
// no attempt starts once it has.
func sleep(ctx context.Context, d time.Duration) (time.Duration, error) {
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		start := time.Now()
		select {
		case <-t.C:
		case <-ctx.Done():
			return min(d, time.Since(start)), ctx.Err()
		}
	}
	return d, ctx.Err()
}

func (c *call) stop(ctx context.Context, err error, reason retry.Reason, elapsed time.Duration, lost bool) error {
	var cause error
	if reason == retry.ReasonContext {
		cause = ctx.Err()
	}
	return c.stopCause(ctx, err, reason, cause, elapsed, lost)
}

// stopCause ends the call: it tells the Observer EventDone and returns the
// error the SDK joins to the attempt's. lost says that the last attempt
// may have been applied; the error matches ErrMaybeApplied when any
// attempt may have been (c.maybe).
func (c *call) stopCause(ctx context.Context, err error, reason retry.Reason, cause error, elapsed time.Duration, lost bool) error {
	last := err
	if reason == retry.ReasonPermanent {
		last = retry.Permanent(err)
	}
	s := &stopError{e: retry.Error{Attempts: c.n, Elapsed: elapsed, Reason: reason, Err: last, Cause: cause}, maybe: c.maybe || lost, lost: lost}
	if p := &c.r.p; p.Observer != nil {
		p.Observer.Observe(ctx, retry.Event{Kind: retry.EventDone, Attempt: c.n, MaxAttempts: c.r.maxAttempts(), Err: &s.e, Reason: reason, Waited: c.waited, Elapsed: elapsed})
	}
	return s
}

func (c *call) emit(ctx context.Context, e retry.Event) {
	if obs := c.r.p.Observer; obs != nil {
		e.MaxAttempts = c.r.maxAttempts()
		if e.Kind != retry.EventDone {
			e.Waited = c.waited
		}
		obs.Observe(ctx, e)
	}
}

// eventErr is the Err of an EventRetry or EventBudgetRefused: retry.Do
// reports a rejected attempt's error there as retry.ErrThrottled itself.
func eventErr(err error) error {
	if _, ok := err.(*throttledError); ok {
		return retry.ErrThrottled
	}
	return err
}

// recordThrottle tells t the outcome of an attempt that was sent, by the
// rule retry.Do applies: a nil err is accepted; otherwise t's
// ThrottleConfig.Accepted decides when set, and the default rule when not
// (see overloaded).
func recordThrottle(t *retry.Throttle, err error) {
	if err == nil {
		t.Record(true)
		return
	}
	if accepted := t.Config().Accepted; accepted != nil {
		t.Record(accepted(err))
		return
	}
	t.Record(!overloaded(err))
}

// sdkAttempt returns the number of the attempt the SDK's retry loop is
// making in ctx (1 for the first; 0 outside the loop) and the attempt limit
// the loop applies (0 for none). The SDK keeps both in the context under
// an unexported key; its exported, deprecated MetricsHeader middleware
// still writes them, as the Amz-Sdk-Request header, into a request handed
// to it, which is where they are read.
func sdkAttempt(ctx context.Context) (attempt, limit int) {
	req := probes.Get().(*smithyhttp.Request)
	defer probes.Put(req)
	clear(req.Header)
	var h string
	next := smithymiddle.FinalizeHandlerFunc(func(_ context.Context, in smithymiddle.FinalizeInput) (smithymiddle.FinalizeOutput, smithymiddle.Metadata, error) {
		h = in.Request.(*smithyhttp.Request).Header.Get("Amz-Sdk-Request")
		return smithymiddle.FinalizeOutput{}, smithymiddle.Metadata{}, nil
	})
	//lint:ignore SA1019 the only exported reader of the SDK's retry metadata
	_, _, _ = awsretry.MetricsHeader{}.HandleFinalize(ctx, smithymiddle.FinalizeInput{Request: req}, next)
	return parseAttemptHeader(h)
}

// parseAttemptHeader reads an Amz-Sdk-Request header ("attempt=2; max=3";
// ttl= and unknown parts ignored); a part that does not parse counts as
// absent (0).
func parseAttemptHeader(h string) (attempt, limit int) {
	for part := range strings.SplitSeq(h, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			continue
		}
		switch k {
		case "attempt":
			attempt = n
		case "max":
			limit = n
		}
	}
	return attempt, limit
}

var probes = sync.Pool{New: func() any { return smithyhttp.NewStackRequest() }}
