package retrygrpc

import (
	"context"
	"strconv"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// UnaryHedgeInterceptor returns an interceptor that hedges unary calls, as
// gRFC A6's hedgingPolicy describes and grpc-go does not implement, with
// retry.HedgeValue: once a copy has been outstanding h's delay
// (hedgingDelay), another copy is sent, up to p.MaxAttempts in all
// (maxAttempts) and h's MaxCopies in flight; the first OK wins, and the
// other copies are cancelled. Configure it per method with WithMethods,
// as the retry policy is (the methods it leaves out are called once), and
// hedge only methods safe to run several times at once.
//
// The codes of WithCodes (by default UNAVAILABLE and RESOURCE_EXHAUSTED)
// are A6's nonFatalStatusCodes: a copy failing with one sends the next
// copy at once; any other code is fatal and ends the call, cancelling the
// copies in flight. A server's grpc-retry-pushback-ms stops further hedges
// (a negative one, "do not retry", is fatal), and so does a
// google.rpc.RetryInfo. Each copy after the first carries
// grpc-previous-rpc-attempts (HeaderPreviousAttempts), the number of
// copies sent before it. Every copy beyond the first draws on p.Budget and
// goes through p.Throttle (A6: hedges count against retry throttling).
// When every copy in flight failed with a non-fatal code, the call is
// retried after p's wait, as UnaryClientInterceptor would (set p.Initial
// to retry.Immediate for A6's behaviour exactly).
//
// A6 commits a call to the first copy that receives response headers.
// grpc-go's unary invoker returns only once the whole response is in, so
// here a copy commits when it ends: an OK wins, and a failure after
// response headers is fatal (the server's application answered; the call
// may have been applied). Each copy is received into a fresh message of
// reply's type, and the winner's is merged into reply; a reply that is not
// a proto.Message (a custom codec) makes the call go through
// UnaryClientInterceptor's rules, unhedged. Streams are not hedged: a
// stream's messages are not independent requests that can be sent twice;
// use StreamClientInterceptor to retry them. A nil h means no hedging: the
// interceptor is then UnaryClientInterceptor(p, opts...).
//
// Errors are as for UnaryClientInterceptor. Do not install both
// interceptors for the same methods: the hedges would be retried again.
func UnaryHedgeInterceptor(p retry.Policy, h *retry.Hedger, opts ...Option) grpc.UnaryClientInterceptor {
	plain := UnaryClientInterceptor(p, opts...)
	if h == nil {
		return plain
	}
	c := newConfig(opts)
	invalid := p.Validate()
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		msg, ok := reply.(proto.Message)
		if !ok || !c.retriesMethod(method) || invalid != nil || ctx.Err() != nil {
			return plain(ctx, method, req, reply, cc, invoker, callOpts...)
		}
		ctx = withoutPrevious(ctx)
		win, err := retry.HedgeValue(ctx, p, h, func(actx context.Context) (proto.Message, error) {
			if n := retry.HedgeAttempt(actx); n > 1 {
				actx = metadata.AppendToOutgoingContext(actx, HeaderPreviousAttempts, strconv.Itoa(n-1))
			}
			out := msg.ProtoReflect().New().Interface()
			var header, trailer metadata.MD
			copts := append(callOpts[:len(callOpts):len(callOpts)], grpc.Header(&header), grpc.Trailer(&trailer))
			if err := invoker(actx, method, req, out, cc, copts...); err != nil {
				return nil, c.classify(ctx, &p, err, trailer, header != nil)
			}
			return out, nil
		})
		if err != nil {
			return result(err)
		}
		proto.Reset(msg)
		proto.Merge(msg, win)
		return nil
	}
}
