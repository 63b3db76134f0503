package retryvalkey

import (
	"context"
	"strings"
)

type safeKey struct{}

// MarkSafe returns a context that marks every command sent with it through
// a client from NewClient as safe to repeat, as valkey-go's
// Completed.ToRetryable does for one command: the caller knows that
// applying it twice does no harm.
func MarkSafe(ctx context.Context) context.Context {
	return context.WithValue(ctx, safeKey{}, true)
}

func markedSafe(ctx context.Context) bool {
	v, _ := ctx.Value(safeKey{}).(bool)
	return v
}

// idempotent reports whether a write (as valkey-go's command words, the
// name first) has the same effect after one run or several, with the same
// list and argument rules as retryredis: SET with EX, PX, EXAT, PXAT,
// KEEPTTL or XX (not NX or GET), SETEX, PSETEX, MSET, DEL, UNLINK, HSET,
// HMSET, HDEL, SADD, SREM, ZADD (not INCR or NX), ZREM, PFADD, LSET,
// SETRANGE, PERSIST, and EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT (not NX).
func idempotent(words []string) bool {
	if len(words) == 0 {
		return false
	}
	switch strings.ToUpper(words[0]) {
	case "SETEX", "PSETEX", "MSET", "DEL", "UNLINK", "HSET", "HMSET", "HDEL", "SADD", "SREM",
		"ZREM", "PFADD", "LSET", "SETRANGE", "PERSIST":
		return true
	case "SET":
		for i := 3; i < len(words); i++ {
			switch strings.ToUpper(words[i]) {
			case "XX", "KEEPTTL":
			case "EX", "PX", "EXAT", "PXAT":
				i++
			default:
				return false
			}
		}
		return true
	case "ZADD":
		for i := 2; i < len(words); i++ {
			switch strings.ToUpper(words[i]) {
			case "XX", "GT", "LT", "CH":
			case "INCR", "NX":
				return false
			default:
				return true // the first score
			}
		}
		return true
	case "EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT":
		for i := 3; i < len(words); i++ {
			if strings.EqualFold(words[i], "NX") {
				return false
			}
		}
		return true
	}
	return false
}

// harmless commands change nothing but are not read-only in valkey-go's
// table.
func harmless(words []string) bool {
	if len(words) == 0 {
		return false
	}
	switch strings.ToUpper(words[0]) {
	case "PING", "ECHO", "TIME", "INFO", "LASTSAVE":
		return true
	}
	return false
}
