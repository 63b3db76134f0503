package retryredis

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// safeKey is the context key of MarkSafe.
type safeKey struct{}

// MarkSafe returns a context that marks every command sent with it as safe
// to repeat, whatever its name: the caller knows that applying it twice
// does no harm (for example an INCR whose result is checked elsewhere, or
// a script written to be idempotent). Use it per call, not for a client.
func MarkSafe(ctx context.Context) context.Context {
	return context.WithValue(ctx, safeKey{}, true)
}

func markedSafe(ctx context.Context) bool {
	v, _ := ctx.Value(safeKey{}).(bool)
	return v
}

// commandTable knows which commands are safe to repeat after they were
// written: read-only ones, from the server's own command table (COMMAND,
// read once and cached) or, until that is read, from builtinReadOnly; and
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
	if markedSafe(ctx) {
		return true
	}
	name := cmd.Name()
	if t.extra[name] {
		return true
	}
	if rule, ok := idempotentWrites[name]; ok {
		return rule == nil || rule(cmd.Args())
	}
	if harmless[name] {
		return true
	}
	if m := t.readOnly.Load(); m != nil {
		if ro, ok := (*m)[name]; ok {
			return ro
		}
	}
	return builtinReadOnly[name]
}

// allSafe reports whether every command of a pipeline or transaction is
// safe to repeat; MULTI and EXEC themselves are left out.
func (t *commandTable) allSafe(ctx context.Context, cmds []redis.Cmder) bool {
	if markedSafe(ctx) {
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

// harmless commands change nothing on the server but are not flagged
// read-only in its command table.
var harmless = map[string]bool{
	"ping": true, "echo": true, "time": true, "info": true, "lastsave": true,
}

// builtinReadOnly is the fallback for the server's command table: the
// commands that Redis 7 flags "readonly", used until COMMAND was read (or
// when it cannot be).
var builtinReadOnly = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields(`
		get mget strlen getrange substr lcs exists type ttl pttl expiretime pexpiretime
		keys scan randomkey dbsize dump touch sort_ro
		hget hmget hgetall hkeys hvals hlen hexists hstrlen hscan hrandfield
		lrange llen lindex lpos
		scard smembers sismember smismember srandmember sinter sintercard sunion sdiff sscan
		zcard zcount zlexcount zrange zrangebylex zrangebyscore zrevrange zrevrangebylex
		zrevrangebyscore zrank zrevrank zscore zmscore zscan zrandmember zinter zintercard zunion zdiff
		xrange xrevrange xlen xread xpending
		bitcount bitpos getbit bitfield_ro pfcount
		geopos geodist georadius_ro georadiusbymember_ro geosearch geohash
		eval_ro evalsha_ro fcall_ro`) {
		m[n] = true
	}
	return m
}()

// idempotentWrites are writes whose effect on the data is the same whether
// they run once or several times in a row, with a rule on their arguments
// where some options break that (nil: always). Their replies to a repeat
// may differ from the first reply (DEL then counts 0 keys deleted, HSET 0
// fields added), which is why options whose reply is the point of the call
// (SET ... NX as a lock, SET ... GET) are excluded. Relative expiries (SET
// ... EX, EXPIRE) restart from the repeat, a few milliseconds later.
var idempotentWrites = map[string]func(args []any) bool{
	"set":       setSafe,
	"setex":     nil,
	"psetex":    nil,
	"mset":      nil,
	"del":       nil,
	"unlink":    nil,
	"hset":      nil,
	"hmset":     nil,
	"hdel":      nil,
	"sadd":      nil,
	"srem":      nil,
	"zadd":      zaddSafe,
	"zrem":      nil,
	"pfadd":     nil,
	"lset":      nil,
	"setrange":  nil,
	"persist":   nil,
	"expire":    expireSafe,
	"pexpire":   expireSafe,
	"expireat":  expireSafe,
	"pexpireat": expireSafe,
}

func argIs(a any, word string) bool {
	s, ok := a.(string)
	return ok && strings.EqualFold(s, word)
}

// setSafe allows SET key value with EX, PX, EXAT, PXAT, KEEPTTL and XX,
// and refuses NX (a repeat after success reports failure: a lock taken by
// the caller itself would look taken by someone else), GET (a repeat
// returns the new value as the old one) and any option it does not know.
func setSafe(args []any) bool {
	for i := 3; i < len(args); i++ {
		s, ok := args[i].(string)
		if !ok {
			return false
		}
		switch strings.ToUpper(s) {
		case "XX", "KEEPTTL":
		case "EX", "PX", "EXAT", "PXAT":
			i++ // the number
		default:
			return false
		}
	}
	return true
}

// zaddSafe refuses INCR (adds again) and NX (as for SET).
func zaddSafe(args []any) bool {
	for i := 2; i < len(args); i++ {
		s, ok := args[i].(string)
		if !ok {
			return true // the first score: options are over
		}
		switch strings.ToUpper(s) {
		case "XX", "GT", "LT", "CH":
		case "INCR", "NX":
			return false
		default:
			return true
		}
	}
	return true
}

// expireSafe refuses NX (as for SET).
func expireSafe(args []any) bool {
	for i := 3; i < len(args); i++ {
		if argIs(args[i], "NX") {
			return false
		}
	}
	return true
}
