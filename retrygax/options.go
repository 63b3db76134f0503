package retrygax

import (
	"time"

	"github.com/retrykit/retry/retryhttp"
	"google.golang.org/grpc/codes"
)

// DefaultMaxServerWait is the longest wait a server may ask for through
// Retry-After or google.rpc.RetryInfo; a server that asks for more gets its
// error returned at once, as retryhttp does.
const DefaultMaxServerWait = 5 * time.Minute

// Option configures WithPolicy. No options means: retry gRPC UNAVAILABLE
// and RESOURCE_EXHAUSTED, REST statuses that retryhttp.DefaultRetryStatus
// accepts (408, 429, 5xx except 501, 505, 511), and honour server waits
// up to DefaultMaxServerWait.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithCodes replaces the gRPC status codes that are retried (by default
// UNAVAILABLE and RESOURCE_EXHAUSTED, with which a server refuses a call it
// did not process). The client reports them too, possibly after the
// server applied the call: UNAVAILABLE for a connection lost before the
// answer came, RESOURCE_EXHAUSTED for a response larger than
// grpc.MaxCallRecvMsgSize. WithPolicy does not retry the second (its
// attempt received response headers: see WithPolicy), but gax shows a
// Retryer nothing of the connection, so it retries the first. Put
// WithPolicy on the methods that are safe to repeat. OK and codes outside
// 0..16 are ignored.
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

// WithRetryStatus replaces the rule that says which REST status codes are
// retried; nil means retryhttp.DefaultRetryStatus. A generated client's
// REST transport sends creates, updates and deletes as POST, PATCH and
// DELETE: for a method that is not safe to repeat, retry only what the
// server refused unprocessed, for example
// WithRetryStatus(func(code int) bool { return code == 429 }).
func WithRetryStatus(retry func(code int) bool) Option {
	return optionFunc(func(c *config) { c.httpStatus = retry })
}

// WithMaxServerWait sets the longest wait honoured from a REST
// Retry-After header or a google.rpc.RetryInfo detail; a server that asks
// for more gets its error returned at once. Zero means
// DefaultMaxServerWait (5 min); negative means server waits are ignored.
func WithMaxServerWait(d time.Duration) Option {
	return optionFunc(func(c *config) { c.maxServerWait = d })
}

type config struct {
	codes         uint32
	codesSet      bool
	httpStatus    func(int) bool
	maxServerWait time.Duration
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if !c.codesSet {
		c.codes = 1<<codes.Unavailable | 1<<codes.ResourceExhausted
	}
	if c.httpStatus == nil {
		c.httpStatus = retryhttp.DefaultRetryStatus
	}
	if c.maxServerWait == 0 {
		c.maxServerWait = DefaultMaxServerWait
	}
	return c
}

func (c *config) retriesCode(code codes.Code) bool {
	return code <= codes.Unauthenticated && c.codes&(1<<code) != 0
}
