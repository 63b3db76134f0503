package retrygrpc

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/retrykit/retry"

	"google.golang.org/grpc/codes"
)

// Defaults used where an option is not given.
const (
	// DefaultMaxServerWait is the longest wait a server may ask for through
	// grpc-retry-pushback-ms or google.rpc.RetryInfo. A server that asks for
	// more gets its error returned to the caller at once (as retryhttp does
	// with Retry-After).
	DefaultMaxServerWait = 5 * time.Minute

	// DefaultMaxBuffer is how many bytes of request messages a stream keeps
	// so that it can replay them on a retry: 256 KiB, as in gRFC A6. A
	// stream whose messages pass it commits (is no longer retried). Each
	// message counts its encoded size plus the 5 bytes of its gRPC frame
	// header, as grpc-go's own retry buffer counts it.
	DefaultMaxBuffer = 256 << 10
)

// msgHeaderLen is the length of a gRPC message's frame header (compression
// flag and length), counted with each message kept for replay.
const msgHeaderLen = 5

// Option configures the interceptors. The zero configuration (no options)
// retries UNAVAILABLE and RESOURCE_EXHAUSTED on every method, honours server
// delays up to DefaultMaxServerWait and buffers up to DefaultMaxBuffer bytes
// per stream.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithCodes replaces the set of status codes that are retried (by default
// UNAVAILABLE and RESOURCE_EXHAUSTED, with which a server refuses a call it
// did not process; grpc-go also reports UNAVAILABLE for a connection lost
// before the answer came, which may be after the server applied the call:
// see WithMethods). For example, for methods that are safe to repeat,
// WithCodes(codes.Unavailable, codes.ResourceExhausted, codes.Internal,
// codes.Unknown) adds the gRPC counterparts of HTTP 500. DEADLINE_EXCEEDED
// is retried whatever the set when the policy has an AttemptTimeout and the
// caller's context is still alive. OK and codes outside 0..16 are ignored.
// WithCodes() with no codes retries nothing but attempt timeouts.
func WithCodes(cs ...codes.Code) Option {
	return optionFunc(func(c *config) {
		c.codes, c.codesSet = 0, true
		for _, code := range cs {
			if code > codes.OK && code <= codes.Unauthenticated {
				c.codes |= 1 << code
			}
		}
	})
}

// WithMethods limits retries to the named methods, given as full method
// names ("/package.Service/Method", as in grpc.UnaryClientInterceptor's
// method argument); every other method is called once, as without the
// interceptor. Without it every method is retried. gRPC has no notion of
// idempotent methods: use WithMethods to name the ones that are safe to
// repeat. The default codes do not guarantee that the server did not apply
// the call: a connection lost after the server applied it, before any
// response headers came back, gives UNAVAILABLE ("error reading from
// server: EOF"), which is retried (as gRFC A6 and grpc-go's own retry
// do). So use it whenever the connection also serves methods that must not
// run twice (a create, a transfer, a send), and whenever WithCodes adds
// codes (such as INTERNAL or UNKNOWN) after which the server may have
// applied the call. Calling it again adds names.
func WithMethods(fullMethods ...string) Option {
	return optionFunc(func(c *config) {
		if c.methods == nil {
			c.methods = make(map[string]struct{}, len(fullMethods))
		}
		for _, m := range fullMethods {
			c.methods[m] = struct{}{}
		}
	})
}

// WithMaxServerWait sets the longest wait honoured from a server's
// grpc-retry-pushback-ms trailer or google.rpc.RetryInfo detail; a server
// that asks for more gets its error returned at once, and so does one that
// asks for more than a time.Duration holds (ParsePushback saturates), even
// with d = math.MaxInt64: as a *retry.Error, so that enclosing retry layers,
// which may not see the trailer, do not retry sooner either. Zero means DefaultMaxServerWait (5 min);
// negative means server waits are ignored and the policy's own waits are
// used (a negative or malformed pushback, which means "do not retry", is
// still obeyed).
func WithMaxServerWait(d time.Duration) Option {
	return optionFunc(func(c *config) { c.maxServerWait = d })
}

// WithMaxBuffer sets how many bytes of request messages a stream keeps for
// replay before it commits, each message counting its encoded size plus
// its 5-byte gRPC frame header. Zero means DefaultMaxBuffer (256 KiB); negative
// means nothing is buffered, so a stream is retried only while the client
// has sent no message.
func WithMaxBuffer(n int) Option {
	return optionFunc(func(c *config) { c.maxBuffer = n })
}

type config struct {
	codes         uint32 // bit 1<<code per retried code
	codesSet      bool
	methods       map[string]struct{} // nil: every method
	maxServerWait time.Duration
	maxBuffer     int
	hedging       bool                // WithHedging was given
	hedger        *retry.Hedger       // WithHedging's (nil is refused by the constructors)
	hedged        map[string]struct{} // nil: every retried method
}

const defaultCodes = 1<<codes.Unavailable | 1<<codes.ResourceExhausted

// build checks what a constructor (named by who) was given, as the
// constructor returns it: an invalid p (the error of p.Validate, which
// names the field), a p with an AttemptTimeout when streams is set (a
// stream's length is the application's, which no timeout per attempt can
// know), and an invalid option (WithHedging with a nil Hedger, or naming
// a method that WithMethods leaves out).
func build(who string, p retry.Policy, streams bool, opts []Option) (*config, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("retrygrpc: %s: %w", who, err)
	}
	if streams && p.AttemptTimeout != 0 {
		return nil, fmt.Errorf("retrygrpc: %s: Policy.AttemptTimeout %v cannot be applied to a stream, whose length is the application's; bound streams with the context (for unary calls with an attempt timeout, install UnaryClientInterceptor with this policy and StreamClientInterceptor with one without it)", who, p.AttemptTimeout)
	}
	c := newConfig(opts)
	if c.hedging && c.hedger == nil {
		return nil, errNilHedger
	}
	if c.methods != nil {
		for _, m := range slices.Sorted(maps.Keys(c.hedged)) {
			if !c.retriesMethod(m) {
				return nil, fmt.Errorf("retrygrpc: %s: WithHedging names %s, which WithMethods leaves out: such a method is called once, so it cannot be hedged; name it in WithMethods too", who, m)
			}
		}
	}
	return c, nil
}

// newConfig applies opts over the defaults.
func newConfig(opts []Option) *config {
	c := &config{}
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
	if !c.codesSet {
		c.codes = defaultCodes
	}
	if c.maxServerWait == 0 {
		c.maxServerWait = DefaultMaxServerWait
	}
	if c.maxBuffer == 0 {
		c.maxBuffer = DefaultMaxBuffer
	}
	return c
}

func (c *config) retriesMethod(m string) bool {
	if c.methods == nil {
		return true
	}
	_, ok := c.methods[m]
	return ok
}

func (c *config) retriesCode(code codes.Code) bool {
	return code <= codes.Unauthenticated && c.codes&(1<<code) != 0
}
