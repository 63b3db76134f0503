package retryvalkey

import "strings"

// Option configures NewClient.
type Option interface{ apply(*config) }

type config struct {
	idempotent []string
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithIdempotent declares more commands (by name, case-insensitive) safe to
// repeat on this client, for example a module's commands or scripts called
// through FCALL that you wrote to be idempotent, as retryredis's option of
// the same name does. Prefer MarkSafe for one call. By default only the
// commands described in the package documentation are.
func WithIdempotent(names ...string) Option {
	return optionFunc(func(c *config) { c.idempotent = append(c.idempotent, names...) })
}

// declared reports whether name is one of WithIdempotent's names. The list
// is short and read-only after NewClient: compared in place, without
// allocating a lower-case copy.
func declared(names []string, name string) bool {
	for _, n := range names {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}
