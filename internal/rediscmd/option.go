package rediscmd

import "strings"

// Option is an option of retryredis.AddHook and retryvalkey.NewClient,
// which both export it under the name Option: the one option type of the
// two Redis modules, written once.
type Option interface{ apply(*Config) }

// Config is what the options set.
type Config struct {
	// Idempotent holds the command names given to WithIdempotent, as
	// given (compare them without regard to case).
	Idempotent []string
}

type optionFunc func(*Config)

func (f optionFunc) apply(c *Config) { f(c) }

// WithIdempotent is both modules' WithIdempotent: it declares more
// commands, by name, safe to repeat.
func WithIdempotent(names ...string) Option {
	return optionFunc(func(c *Config) { c.Idempotent = append(c.Idempotent, names...) })
}

// Collect applies opts, nil ones skipped, to a zero Config.
func Collect(opts []Option) Config {
	var c Config
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

// Declared reports whether name is one of c's Idempotent names, without
// regard to case. The list is short and read-only once collected: it is
// compared in place, without allocating a lower-case copy.
func (c *Config) Declared(name string) bool {
	for _, n := range c.Idempotent {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}
