package retryredis

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/internal/rediscmd"
)

// safeMark is the mark of MarkSafe.
var safeMark rediscmd.SafeMark

// MarkSafe returns a context that marks every command sent with it as safe
// to repeat, whatever its name: the caller knows that applying it twice
// does no harm (for example an INCR whose result is checked elsewhere, or
// a script written to be idempotent). Use it per call, not for a client.
// The mark is retryredis's own: retryvalkey does not see it.
func MarkSafe(ctx context.Context) context.Context { return safeMark.Mark(ctx) }

// commandTable knows which commands are safe to repeat after they were
// written: read-only ones, from the server's own command table (COMMAND,
// read once and cached) or, until that is read, from rediscmd's built-in
// table; and
// the idempotent writes of idempotentWrites, with their argument rules.
type commandTable struct {
	readOnly atomic.Pointer[map[string]bool] // from the server; nil until read
	extra    map[string]bool                 // WithIdempotent, read-only after construction

	mu       sync.Mutex
	lastTry  time.Time
	loading  atomic.Bool
	needLoad atomic.Bool
}

// reloadEvery is how often the hook tries again to read the server's
// command table after a failure, on the path of a successful command.
const reloadEvery = 30 * time.Second

// load reads the server's command table through process, which must be a
// single attempt (the hook's next), and keeps it when it is usable.
func (t *commandTable) load(ctx context.Context, process redis.ProcessHook) {
	cmd := redis.NewCommandsInfoCmd(ctx, "command")
	err := process(ctx, cmd)
	if err == nil {
		if m := cmd.Val(); len(m) > 0 {
			ro := make(map[string]bool, len(m))
			for name, ci := range m {
				ro[strings.ToLower(name)] = ci.ReadOnly
			}
			t.readOnly.Store(&ro)
			t.needLoad.Store(false)
			return
		}
	}
	t.needLoad.Store(true)
}

// maybeReload tries again to read the table when an earlier try failed and
// reloadEvery has passed. Only one goroutine tries at a time.
func (t *commandTable) maybeReload(ctx context.Context, process redis.ProcessHook) {
	if !t.loading.CompareAndSwap(false, true) {
		return
	}
	defer t.loading.Store(false)
	t.mu.Lock()
	now := time.Now()
	due := now.Sub(t.lastTry) >= reloadEvery
	if due {
		t.lastTry = now
	}
	t.mu.Unlock()
	if due {
		t.load(ctx, process)
	}
}

// safe reports whether cmd may be sent again after it was written.
func (t *commandTable) safe(ctx context.Context, cmd redis.Cmder) bool {
	if safeMark.Marked(ctx) {
		return true
	}
	name, ok := wireName(cmd)
	if !ok {
		return false
	}
	if t.extra[name] {
		return true
	}
	if rediscmd.IdempotentWrite(name, args(cmd.Args())) || rediscmd.Harmless(name) {
		return true
	}
	var server map[string]bool
	if m := t.readOnly.Load(); m != nil {
		server = *m
	}
	return rediscmd.ReadOnly(server, name)
}

// allSafe reports whether every command of a pipeline or transaction is
// safe to repeat; MULTI and EXEC themselves are left out.
func (t *commandTable) allSafe(ctx context.Context, cmds []redis.Cmder) bool {
	if safeMark.Marked(ctx) {
		return true
	}
	for _, c := range cmds {
		switch c.Name() {
		case "multi", "exec":
			continue
		}
		if !t.safe(ctx, c) {
			return false
		}
	}
	return true
}
