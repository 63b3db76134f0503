package retrygrpc

import (
	"context"
	"errors"
	"strconv"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
)

// WithHedging makes UnaryClientInterceptor (and so DialOptions) hedge the
// unary methods named, given as full method names; with no name, every
// method the interceptor retries (see WithMethods). Methods it does not
// name keep their retries. Hedging is gRFC A6's hedgingPolicy, which
// grpc-go does not implement, with retry.HedgeValue: once a copy has been
// outstanding h's delay (hedgingDelay), another copy is sent, up to
// p.MaxAttempts in all (maxAttempts) and h's MaxCopies in flight; the first
// OK wins, and the other copies are cancelled. Hedge only methods safe to
// run several times at once. &retry.Hedger{} (the zero Hedger) hedges with
// the defaults, adaptively; share one per backend. A nil h is refused: the
// constructor given it (UnaryClientInterceptor, StreamClientInterceptor or
// DialOptions) returns an error saying so (leave the option out for no
// hedging), and so does one given a name that WithMethods leaves out (a
// method called once cannot be hedged). Calling it again replaces h and
// adds names.
//
// The codes of WithCodes (by default UNAVAILABLE and RESOURCE_EXHAUSTED)
// are A6's nonFatalStatusCodes: a copy failing with one sends the next
// copy at once; any other code is fatal and ends the call, cancelling the
// copies in flight. A server's grpc-retry-pushback-ms stops further hedges
// in the burst, and so does a google.rpc.RetryInfo; a negative pushback,
// "do not retry", is fatal. A6 sends the next hedge once a positive
// pushback's wait is over; here the retry after the burst waits for it.
// Each copy after the first carries grpc-previous-rpc-attempts
// (HeaderPreviousAttempts), the number of copies sent before it. Every copy
// beyond the first draws on p.Budget and goes through p.Throttle (A6:
// hedges count against retry throttling). When every copy in flight failed
// with a non-fatal code, the call is retried after p's wait; with p.Initial
// set to retry.Immediate that retry is A6's next hedge, sent at once.
// p.MaxAttempts is not capped at A6's 5: set it (the zero Policy's is 10).
//
// A6 commits a call to the first copy that receives response headers.
// grpc-go's unary invoker returns only once the whole response is in, so
// here a copy commits when it ends: an OK wins, and a failure after
// response headers is fatal (the server's application answered; the call
// may have been applied). Each copy is received into a fresh message of
// reply's type, and the winner's is merged into reply (the caller's
// grpc.Header, grpc.Trailer and grpc.Peer options get the metadata of the
// copy whose outcome the call returns, the winner's); a reply that is not
// a proto.Message (a custom codec) makes the call go unhedged. Streams are
// not hedged: a stream's messages are not independent requests that can be
// sent twice, so the option hedges nothing in StreamClientInterceptor
// (which accepts it, so that one list of options serves both
// interceptors). The caller's
// other call options apply to every copy: a grpc.OnFinish callback, for
// one, runs once per copy, possibly for several at once.
func WithHedging(h *retry.Hedger, fullMethods ...string) Option {
	return optionFunc(func(c *config) {
		c.hedging, c.hedger = true, h
		if len(fullMethods) == 0 {
			return
		}
		if c.hedged == nil {
			c.hedged = make(map[string]struct{}, len(fullMethods))
		}
		for _, m := range fullMethods {
			c.hedged[m] = struct{}{}
		}
	})
}

// errNilHedger is the error of a constructor given WithHedging(nil).
var errNilHedger = errors.New("retrygrpc: WithHedging with a nil *retry.Hedger (&retry.Hedger{} hedges with the defaults; leave the option out for no hedging)")

// hedges reports whether method is hedged (WithHedging was given).
func (c *config) hedges(method string) bool {
	if c.hedged == nil {
		return c.retriesMethod(method)
	}
	_, ok := c.hedged[method]
	return ok
}

// hedging returns the interceptor that hedges the methods of c.hedges with
// c.hedger and hands every other call to plain, the retry interceptor.
func hedging(p retry.Policy, c *config, plain grpc.UnaryClientInterceptor) grpc.UnaryClientInterceptor {
	h := c.hedger
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		msg, ok := reply.(proto.Message)
		if !ok || !c.hedges(method) || ctx.Err() != nil {
			return plain(ctx, method, req, reply, cc, invoker, callOpts...)
		}
		ctx = withoutPrevious(ctx)
		opts, into := splitMetadataOptions(callOpts)
		win, err := retry.HedgeValue(ctx, p, h, func(actx context.Context) (*hedgeReply, error) {
			if n := retry.HedgeAttempt(actx); n > 1 {
				actx = metadata.AppendToOutgoingContext(actx, HeaderPreviousAttempts, strconv.Itoa(n-1))
			}
			r := &hedgeReply{msg: msg.ProtoReflect().New().Interface()}
			copts := append(opts[:len(opts):len(opts)], grpc.Header(&r.header), grpc.Trailer(&r.trailer))
			if len(into.peers) > 0 {
				copts = append(copts, grpc.Peer(&r.peer))
			}
			if err := invoker(actx, method, req, r.msg, cc, copts...); err != nil {
				return r, c.classify(ctx, &p, err, r.trailer, r.header != nil)
			}
			return r, nil
		})
		if win != nil {
			into.set(win)
		}
		if err != nil {
			return result(err)
		}
		proto.Reset(msg)
		proto.Merge(msg, win.msg)
		return nil
	}
}

// hedgeReply is what one copy of a hedged call received.
type hedgeReply struct {
	msg             proto.Message
	header, trailer metadata.MD
	peer            peer.Peer
}

// metadataTargets are the caller's grpc.Header, grpc.Trailer and grpc.Peer
// options of a hedged call. Copies run at once and a loser ends after the
// winner: each copy receives into its own, and the caller's get the
// values of the copy whose outcome the call returns.
type metadataTargets struct {
	headers, trailers []*metadata.MD
	peers             []*peer.Peer
}

func (m *metadataTargets) set(r *hedgeReply) {
	for _, a := range m.headers {
		*a = r.header
	}
	for _, a := range m.trailers {
		*a = r.trailer
	}
	for _, a := range m.peers {
		*a = r.peer
	}
}

// splitMetadataOptions returns callOpts without their grpc.Header,
// grpc.Trailer and grpc.Peer options, and the targets of those.
func splitMetadataOptions(callOpts []grpc.CallOption) ([]grpc.CallOption, metadataTargets) {
	var m metadataTargets
	rest := make([]grpc.CallOption, 0, len(callOpts))
	for _, o := range callOpts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			m.headers = append(m.headers, o.HeaderAddr)
		case grpc.TrailerCallOption:
			m.trailers = append(m.trailers, o.TrailerAddr)
		case grpc.PeerCallOption:
			m.peers = append(m.peers, o.PeerAddr)
		default:
			rest = append(rest, o)
		}
	}
	return rest, m
}
