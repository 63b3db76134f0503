package retryaws

import (
	"context"
	"errors"
	"fmt"
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

// New returns a Retryer that retries as p says, or an error: p.Validate's,
// one naming a Policy field the Retryer cannot apply (AttemptTimeout:
// docs/engine.md has the table for every module), or that of an option
// given a bad value.
// With no options it retries what the SDK's standard retryer retries,
// repeats after a lost reply only what Safety (or MarkSafe) says is safe,
// and honours x-amz-retry-after up to DefaultMaxServerWait.
func New(p retry.Policy, opts ...Option) (*Retryer, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("retryaws: New: %w", err)
	}
	if p.AttemptTimeout != 0 {
		return nil, fmt.Errorf("retryaws: New: Policy.AttemptTimeout %v cannot be applied: the SDK makes each attempt, and a Retryer cannot bound it; use the HTTP client's timeouts or the call's context", p.AttemptTimeout)
	}
	c := newConfig(opts)
	if c.err != nil {
		return nil, c.err
	}
	return &Retryer{p: p, c: c}, nil
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
		// Retries were accounted by GetRetryToken.
		return nopRelease, nil
	}
	if limit != 0 {
		return nil, &overrideError{max: limit}
	}
	c := r.newCall(ctx)
	c.sdkN = 1
	// A first attempt that the Throttle rejects waits and asks again, as
	// in retry.Do: the attempts then sent are retries, which earn the
	// Budget nothing.
	for {
		if _, err := c.l.Begin(ctx); err == nil {
			return c.release, nil
		}
		if _, stop := c.l.Failed(ctx, retry.ErrThrottled); stop != nil {
			return nil, c.stop(stop, false)
		}
		if stop := c.l.Wait(ctx); stop != nil {
			return nil, c.stop(stop, false)
		}
	}
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
		// kept (see park): decide as for a call's first attempt, the one
		// this failure reports, which the Throttle is told here.
		c = k
		c.l.Record(overloadMark{opErr})
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
	l         retry.Loop // the call's loop, on r.p
	service   string     // the SDK's service ID
	operation string
	class     Class
	marked    bool      // MarkSafe
	maybe     bool      // an attempt may have been applied (see judge)
	sdkN      int       // the SDK's number of the attempt being made
	fixedBody bool      // ended because its body cannot be sent again (AddBodyCheck)
	lostAt    time.Time // the first failure that may have been applied
	nextInMap *call     // another call parked under the same error value
}

func (r *Retryer) newCall(ctx context.Context) *call {
	c := &call{r: r, l: r.p.Loop(), service: awsmiddle.GetServiceID(ctx), operation: awsmiddle.GetOperationName(ctx)}
	c.class = r.c.class(c.service, c.operation)
	c.marked = markedSafe(ctx)
	return c
}

// release is told the outcome of an attempt of c: the SDK calls it after
// the attempt (as the first attempt's attempt token, then as the retry
// token of each retry).
func (c *call) release(err error) error {
	if err == nil {
		c.l.Succeeded(context.Background()) // the release has no context
		return nil
	}
	c.l.Record(overloadMark{err})
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

// decide handles the failure of the current attempt of c with err: it
// classifies err, hands it to the call's loop, and waits. Nil means retry
// (the wait is over and the next attempt may be sent), otherwise the error
// to return to the SDK.
func (c *call) decide(ctx context.Context, err error) error {
	p := &c.r.p
	v := judge(err, c.class, c.marked)
	c.maybe = c.maybe || v.maybe
	if v.maybe && c.lostAt.IsZero() {
		c.lostAt = time.Now()
		if c.class == Token && !c.marked {
			// The service would no longer know the token of the attempt
			// that may have been applied.
			c.l.Until(c.lostAt.Add(TokenWindow))
		}
	}
	switch {
	case retry.IsExhausted(err) && !p.RetryExhausted:
		// The loop gives up with ReasonExhausted (or the context's end).
	case !v.safe && ctx.Err() == nil:
		err = retry.Permanent(err) // not safe to repeat: Retryable cannot change that
	case !v.retry && p.Retryable == nil && ctx.Err() == nil:
		err = retry.Permanent(err) // Retryable, when set, replaces the SDK's rule
	case fixedBody(ctx) && ctx.Err() == nil:
		// AddBodyCheck found a body the SDK cannot rewind: it would fail
		// the retry before sending it.
		err = retry.Permanent(err)
		c.fixedBody = true
	case v.hasHint && c.r.c.serverWaitCap() >= 0:
		if serverwait.Beyond(v.hint, c.r.c.serverWaitCap()) {
			// A server that asks for more than the cap (or more than a
			// Duration holds) gets its error at once.
			err = retry.Permanent(err)
		} else {
			err = retry.ServerWait(err, serverwait.Jitter(v.hint))
		}
	}
	if _, stop := c.l.Failed(ctx, err); stop != nil {
		return c.stop(stop, v.maybe)
	}
	if stop := c.l.Wait(ctx); stop != nil {
		return c.stop(stop, v.maybe)
	}
	// A Throttle that rejects the next attempt makes it count as an
	// attempt, and the loop goes on as after any failure.
	for {
		if _, err := c.l.Begin(ctx); err == nil {
			return nil
		}
		if _, stop := c.l.Failed(ctx, retry.ErrThrottled); stop != nil {
			return c.stop(stop, v.maybe)
		}
		if stop := c.l.Wait(ctx); stop != nil {
			return c.stop(stop, v.maybe)
		}
	}
}

// stop is the error the SDK joins to the attempt's when c's loop ended
// with e (a *retry.Error). lost says that the last attempt may have been
// applied; the error matches retry.ErrMaybeApplied when any attempt may
// have been (c.maybe).
func (c *call) stop(e error, lost bool) error {
	re, _ := e.(*retry.Error)
	return &stopError{e: re, maybe: c.maybe || lost, lost: lost, fixedBody: c.fixedBody && re.Reason == retry.ReasonPermanent}
}

// overloadMark is an attempt's error as the Throttle's default rule reads
// it: overloaded (see classify.go) is a rejection.
type overloadMark struct{ err error }

func (e overloadMark) Error() string    { return e.err.Error() }
func (e overloadMark) Unwrap() error    { return e.err }
func (e overloadMark) Overloaded() bool { return overloaded(e.err) }

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
