package retrygrpc

import (
	"context"
	"strconv"
	"sync"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// UnaryClientInterceptor returns an interceptor that retries unary calls
// (and hedges those that WithHedging names)
// with the waits and stop rules of p: MaxAttempts, MaxElapsed,
// AttemptTimeout (each attempt gets its own deadline), Budget, Throttle,
// the nesting rule (an error that a lower retrykit layer gave up on is not
// retried unless p.RetryExhausted) and the Observer and Logger hooks, all
// as in retry.Do: each call is a retry.Loop.
//
// Retried: the codes of WithCodes (by default UNAVAILABLE and
// RESOURCE_EXHAUSTED), and DEADLINE_EXCEEDED when p has an AttemptTimeout
// and the caller's context is still alive; on the methods of WithMethods
// (by default every method); and only when the attempt received no
// response headers (gRFC A6's commit rule, as in grpc-go's own retry: a
// trailers-only response, or a failure before any response). Headers mean
// that the server's application answered, so the call may have been
// applied and the error may be the client's own: a response larger than
// grpc.MaxCallRecvMsgSize fails with RESOURCE_EXHAUSTED after the server
// ran the method. grpc-go's own RESOURCE_EXHAUSTED for a request over
// grpc.MaxCallSendMsgSize, raised on the client before sending, is not
// retried either: every attempt would repeat it. A server's grpc-retry-pushback-ms trailer and
// google.rpc.RetryInfo detail set the least wait (capped, see
// WithMaxServerWait, plus a jitter of up to min(1 s, 10%)); a wait that
// would pass the context's deadline or p.MaxElapsed ends the call at once;
// a trailer with more than one pushback value is not retried, as grpc-go
// does not retry it.
// p.Retryable, when set, replaces the code rule (WithCodes, and
// DEADLINE_EXCEEDED with an AttemptTimeout), as it replaces retry.Do's
// default rule; the commit rule and the server's "do not retry" still
// stop the call.
//
// The error: the attempt's status error, unchanged, when the first
// attempt's error itself ends the call (a code that is not retried,
// CANCELLED or DEADLINE_EXCEEDED from the caller's context included, an
// exhausted lower layer). When the caller's context ends the call after an
// attempt that failed with a code that is retried (in the wait before a
// retry, or before it began), the error matches the context's error
// (errors.Is(err, context.Canceled), or context.DeadlineExceeded) and its
// status.Code is CANCELLED or DEADLINE_EXCEEDED, as grpc-go's own retry
// reports it, whichever wait it ended in; it wraps a *retry.Error
// (ReasonContext) whose Err is the last attempt's status error. Otherwise
// it is a *retry.Error wrapping the last attempt's status error, so that
// status.Code(err) is the last attempt's code and enclosing retry loops
// (retry.Do, retrygax, another interceptor) do not retry it again (when a
// Throttle rejected the retries left, it still carries the status of the
// last attempt sent, and errors.Is(err, retry.ErrThrottled) holds). That is the case after
// retries, when a limit of the loop refused the first retry (Budget,
// deadline, MaxElapsed), and when the server's answer refused it: a "do
// not retry" pushback, a wait beyond WithMaxServerWait, or response
// headers on a code that is otherwise retried (ReasonPermanent), which the
// layers above cannot see. A call whose context has already ended is made once,
// as without the interceptor (grpc-go fails it at once with CANCELLED or
// DEADLINE_EXCEEDED), and its error returned unchanged; the loop, and with
// it the Throttle, the Budget and the Observer, does not see it. (With a
// policy whose first attempt the loop makes, a context that ends between
// the interceptor's look at it and the loop's ends the call in the loop,
// before any attempt: the error is then the context's, as above, after 0
// attempts, and the Observer is told EventDone of attempt 0.)
//
// Retries carry grpc-previous-rpc-attempts (HeaderPreviousAttempts); a
// value in the caller's outgoing metadata (a proxy that forwards its
// incoming metadata passes on the count of the hop before) is dropped
// from every attempt, on the methods that WithMethods leaves out too (the
// interceptor owns the key wherever it is installed). Looking for it
// costs no allocation.
//
// The first attempt is the caller's call with two extra call options
// (grpc.Header and grpc.Trailer, to read the headers and the trailer): the
// interceptor allocates nothing of its own, and grpc-go copies the
// response headers and the trailer for these options (see the package
// documentation for the count).
//
// It returns an error, and no interceptor, for an invalid p (wrapping the
// error of p.Validate, which names the field; errors.Is(err,
// retry.ErrInvalidPolicy) holds) and for WithHedging with a nil Hedger.
// Every Policy field is honoured on unary calls.
func UnaryClientInterceptor(p retry.Policy, opts ...Option) (grpc.UnaryClientInterceptor, error) {
	c, err := build("UnaryClientInterceptor", p, false, opts)
	if err != nil {
		return nil, err
	}
	return unary(p, c), nil
}

// unary is UnaryClientInterceptor once p and c are known to be valid.
func unary(p retry.Policy, c *config) grpc.UnaryClientInterceptor {
	if c.hedging {
		return hedging(p, c, retrying(p, c))
	}
	return retrying(p, c)
}

// retrying is UnaryClientInterceptor without hedging.
func retrying(p retry.Policy, c *config) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		// The key is the retry layer's on every method it is installed for:
		// a method that is not retried makes a first attempt, which carries
		// none. No allocation when the caller's metadata lacks it.
		ctx = withoutPrevious(ctx)
		if !c.retriesMethod(method) {
			return invoker(ctx, method, req, reply, cc, callOpts...)
		}
		if ctx.Err() != nil {
			// Ended before the first attempt: make it as grpc-go would
			// without the interceptor (it fails at once with CANCELLED or
			// DEADLINE_EXCEEDED) and return its error unchanged, rather
			// than a *retry.Error of zero attempts, which holds no status.
			return invoker(ctx, method, req, reply, cc, callOpts...)
		}
		u := unaryPool.Get().(*unaryCall)
		if len(callOpts) == 0 {
			u.opts = u.only[:]
		} else {
			u.opts = append(append(u.buf[:0], callOpts...), u.only[:]...)
			u.buf = u.opts
		}
		err := u.run(ctx, &p, c, method, req, reply, cc, invoker)
		u.reset()
		unaryPool.Put(u)
		return result(err)
	}
}

// run makes the attempts of one unary call through the call's retry.Loop,
// and returns nil or the Loop's *retry.Error.
func (u *unaryCall) run(ctx context.Context, p *retry.Policy, c *config, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker) error {
	l := p.Loop()
	sent := 0 // attempts sent (not rejected by the Throttle)
	for {
		actx, err := l.Begin(ctx)
		if err == nil {
			if sent > 0 {
				actx = metadata.AppendToOutgoingContext(actx, HeaderPreviousAttempts, strconv.Itoa(sent))
			}
			sent++
			u.header, u.trailer = nil, nil
			if err = invoker(actx, method, req, reply, cc, u.opts...); err == nil {
				l.Succeeded(ctx)
				return nil
			}
			err = c.classify(ctx, p, err, u.trailer, u.header != nil)
		}
		if _, stop := l.Failed(ctx, err); stop != nil {
			return stop
		}
		if stop := l.Wait(ctx); stop != nil {
			return stop
		}
	}
}

// unaryCall holds what one unary call needs beyond its closure, pooled so
// that the first attempt allocates nothing in the interceptor itself.
type unaryCall struct {
	// header is the attempt's response headers, nil when none arrived (a
	// trailers-only response, or no stream at all): grpc-go sets it only
	// when the server sent headers. An attempt that got headers is
	// committed (gRFC A6) and not retried.
	header metadata.MD
	// trailer is the attempt's trailer, for grpc-retry-pushback-ms.
	trailer metadata.MD
	only    [2]grpc.CallOption // {grpc.Header(&header), grpc.Trailer(&trailer)}, built once
	buf     []grpc.CallOption  // reused for calls with options
	opts    []grpc.CallOption  // the options of this call
}

func (u *unaryCall) reset() {
	u.header, u.trailer = nil, nil
	if len(u.opts) > len(u.only) {
		clear(u.buf) // drop the caller's options
		u.buf = u.buf[:0]
	}
	u.opts = nil
}

var unaryPool = sync.Pool{New: func() any {
	u := new(unaryCall)
	u.only = [2]grpc.CallOption{grpc.Header(&u.header), grpc.Trailer(&u.trailer)}
	return u
}}

// DialOptions returns the dial options that make retrykit the one retry
// layer of a grpc.ClientConn: both interceptors (chained, so that other
// interceptors may be added) with p and opts, and grpc.WithDisableRetry(),
// which turns off the retries a service config could enable. What stays is
// grpc-go's transparent retry of an attempt that never reached the server
// application (the stream was refused or never left the client), once, as
// gRFC A6 allows: such an attempt did nothing.
//
// It refuses what either interceptor refuses: an invalid p, WithHedging
// with a nil Hedger, and a p with an AttemptTimeout, which streams cannot
// honour (the error names Policy.AttemptTimeout). For an attempt timeout
// on unary calls, install the two interceptors and grpc.WithDisableRetry()
// yourself, giving the stream interceptor a policy without it.
func DialOptions(p retry.Policy, opts ...Option) ([]grpc.DialOption, error) {
	c, err := build("DialOptions", p, true, opts)
	if err != nil {
		return nil, err
	}
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(unary(p, c)),
		grpc.WithChainStreamInterceptor(streaming(p, c)),
		grpc.WithDisableRetry(),
	}, nil
}

// withoutPrevious returns ctx without the grpc-previous-rpc-attempts that
// its outgoing metadata may carry (a proxy that forwards its incoming
// metadata passes on the count of the hop before): the interceptors set
// that key themselves, on retries only. The common case, no such key,
// costs a lookup and no allocation.
func withoutPrevious(ctx context.Context) context.Context {
	if metadata.ValueFromOutgoingContext(ctx, HeaderPreviousAttempts) == nil {
		return ctx
	}
	md, _ := metadata.FromOutgoingContext(ctx) // a copy
	md.Delete(HeaderPreviousAttempts)
	return metadata.NewOutgoingContext(ctx, md)
}
