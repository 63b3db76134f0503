package retryaws

import (
	"errors"
	"fmt"
	"time"
)

// DefaultMaxServerWait is the longest wait a service may ask for through
// x-amz-retry-after; a service that asks for more gets its error returned
// at once, as retryhttp does with Retry-After.
const DefaultMaxServerWait = 5 * time.Minute

// Option configures New. No options means: the classes of Safety, and
// server waits honoured up to DefaultMaxServerWait.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithClass sets the class of operations of a service (by the SDK's
// service ID, such as ServiceDynamoDB, and operation names, such as
// "UpdateItem"), replacing what Safety says of them: for example
// WithClass(ServiceDynamoDB, Idempotent, "UpdateItem") for an application
// whose UpdateItem calls only SET fixed values, or WithClass(ServiceS3,
// Unsafe, "PutObject") for one that must not overwrite a newer object. A
// later WithClass for the same operation wins. MarkSafe does the same for
// one call. A Class other than the four constants makes New fail.
func WithClass(service string, c Class, operations ...string) Option {
	return optionFunc(func(cf *config) {
		if c > Token {
			cf.err = errors.Join(cf.err, fmt.Errorf("retryaws: WithClass(%q, Class(%d), ...): not a Class", service, uint8(c)))
			return
		}
		if cf.classes == nil {
			cf.classes = make(map[opKey]Class)
		}
		for _, op := range operations {
			cf.classes[opKey{service, op}] = c
		}
	})
}

// WithMaxServerWait sets the longest wait honoured from an
// x-amz-retry-after header; a service that asks for more gets its error
// returned at once. Zero means DefaultMaxServerWait (5 min); negative
// means the header is ignored.
func WithMaxServerWait(d time.Duration) Option {
	return optionFunc(func(c *config) { c.maxServerWait = d })
}

type opKey struct{ service, operation string }

type config struct {
	classes       map[opKey]Class
	maxServerWait time.Duration
	err           error // of an option given a bad value
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

// serverWaitCap is WithMaxServerWait's value, its default resolved.
func (c *config) serverWaitCap() time.Duration {
	if c.maxServerWait == 0 {
		return DefaultMaxServerWait
	}
	return c.maxServerWait
}

// class returns the class of an operation: an option's, else Safety's.
func (c *config) class(service, operation string) Class {
	if k, ok := c.classes[opKey{service, operation}]; ok {
		return k
	}
	return Safety(service, operation)
}
