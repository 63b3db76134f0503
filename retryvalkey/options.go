package retryvalkey

import "github.com/retrykit/retry/internal/rediscmd"

// Option configures NewClient. It is the same type as retryredis.Option:
// the two Redis modules take the same options. A nil Option is ignored.
type Option = rediscmd.Option

// WithIdempotent declares more commands (by name, case-insensitive) safe to
// repeat on this client, for example a module's commands or scripts called
// through FCALL that you wrote to be idempotent, as retryredis's option of
// the same name does. Prefer MarkSafe for one call. By default only the
// commands described in the package documentation are.
func WithIdempotent(names ...string) Option { return rediscmd.WithIdempotent(names...) }
