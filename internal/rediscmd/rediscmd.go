// Package rediscmd holds what retryredis and retryvalkey share about Redis
// commands: which error replies are refusals (the server did not run the
// command), and which commands may be sent again after they were written.
// It is independent of any client library: commands are a name plus an
// accessor for their arguments.
package rediscmd

import (
	"iter"
	"maps"
	"strings"
)

// Refusal reports whether a server error reply means that the server did
// not run the command and may run it later: a dataset still loading
// (LOADING), a script or function running too long (BUSY), a slot in
// migration (TRYAGAIN), a cluster down (CLUSTERDOWN), a replica without
// its primary (MASTERDOWN), a write sent to a replica during a failover
// (READONLY), too few replicas for a write (NOREPLICAS), or too many
// clients. BUSYKEY and BUSYGROUP, which say the request conflicts with
// existing data, are not refusals.
func Refusal(msg string) bool {
	code, _, _ := strings.Cut(msg, " ")
	switch code {
	case "LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "NOREPLICAS":
		return true
	case "ERR":
		return strings.HasPrefix(msg, "ERR max number of clients reached")
	}
	return false
}

// Args gives a command's arguments after its name as the server receives
// them: Arg(i) is the bytes of argument i (0 = the first after the name),
// with ok true, or ok false when they are not known (the caller could not
// render the argument), which is taken to mean any word at all. Len is
// their number. A client that writes other types than strings (numbers,
// byte slices, pointers) renders each as the bytes it writes on the wire.
type Args interface {
	Len() int
	Arg(i int) (s string, ok bool)
}

// Harmless reports whether the command (name in any case) changes nothing
// on the server although its command table does not flag it read-only.
func Harmless(name string) bool {
	var buf [maxName]byte
	switch string(upper(&buf, name)) {
	case "PING", "ECHO", "TIME", "INFO", "LASTSAVE":
		return true
	}
	return false
}

// IdempotentWrite reports whether the write has the same effect on the
// data after one run or several in a row: SET with EX, PX, EXAT, PXAT,
// KEEPTTL or XX (not NX, whose reply is the point of the call and says
// "not set" after a repeat of a successful call, nor GET, nor an option it
// does not know), SETEX, PSETEX, MSET, DEL, UNLINK, HSET, HMSET, HDEL,
// SADD, SREM, ZADD (not INCR or NX), ZREM, PFADD, LSET, SETRANGE, PERSIST,
// and EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT (not NX). The reply to a repeat
// may differ (DEL then counts 0 keys, HSET 0 new fields); relative expiries
// restart from the repeat.
//
// It reads names and options as the server does: names whole and options
// up to their first NUL byte (the server compares them as C strings, so
// "NX\x00" is NX), both in ASCII case only; an argument that is not known
// counts as any option. It allocates nothing, and is generic over the
// arguments' type so that a caller's slice is not boxed into an interface.
func IdempotentWrite[A Args](name string, a A) bool {
	var buf [maxName]byte
	switch string(upper(&buf, name)) {
	case "SETEX", "PSETEX", "MSET", "DEL", "UNLINK", "HSET", "HMSET", "HDEL", "SADD", "SREM",
		"ZREM", "PFADD", "LSET", "SETRANGE", "PERSIST":
		return true
	case "SET": // SET key value [options]
		for i := 2; i < a.Len(); i++ {
			s, ok := a.Arg(i)
			switch {
			case !ok:
				return false
			case option(s, "XX"), option(s, "KEEPTTL"):
			case option(s, "EX"), option(s, "PX"), option(s, "EXAT"), option(s, "PXAT"):
				i++ // the number, whatever it is
			default:
				return false
			}
		}
		return true
	case "ZADD": // ZADD key [options] score member ...
		for i := 1; i < a.Len(); i++ {
			s, ok := a.Arg(i)
			switch {
			case !ok, option(s, "INCR"), option(s, "NX"):
				return false
			case option(s, "XX"), option(s, "GT"), option(s, "LT"), option(s, "CH"):
			default:
				return true // the first score: options are over
			}
		}
		return true
	case "EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT": // EXPIRE key n [option]
		for i := 2; i < a.Len(); i++ {
			if s, ok := a.Arg(i); !ok || option(s, "NX") {
				return false
			}
		}
		return true
	}
	return false
}

// maxName is longer than every name Harmless and IdempotentWrite know.
const maxName = 16

// upper returns name in ASCII upper case, made in buf, or nil when name is
// longer than buf (no name known here is). Switching on its conversion to
// a string allocates nothing.
func upper(buf *[maxName]byte, name string) []byte {
	if len(name) > len(buf) {
		return nil
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf[i] = c
	}
	return buf[:len(name)]
}

// option reports whether the server reads word as opt (in upper case): it
// compares options as C strings, up to the first NUL byte, with ASCII
// case folding (strcasecmp).
func option(word, opt string) bool {
	if i := strings.IndexByte(word, 0); i >= 0 {
		word = word[:i]
	}
	if len(word) != len(opt) {
		return false
	}
	for i := 0; i < len(word); i++ {
		c := word[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != opt[i] {
			return false
		}
	}
	return true
}

// Strings adapts the words of a command after its name to Args.
type Strings []string

// Len returns len(s).
func (s Strings) Len() int { return len(s) }

// Arg returns s[i], true.
func (s Strings) Arg(i int) (string, bool) { return s[i], true }

// ReadOnly reports whether the command name (in any case) is read-only, so
// that it may be sent again after it was written: as server says when
// server (a server's command table, lower-case names, from COMMAND) knows
// the command, else as Redis 7 flags it (a built-in table). It allocates
// nothing for names of up to 32 bytes.
func ReadOnly(server map[string]bool, name string) bool {
	if server != nil {
		if ro, ok := lookup(server, name); ok {
			return ro
		}
	}
	ro, _ := lookup(builtinReadOnly, name)
	return ro
}

// BuiltinReadOnly returns the names (lower case) of the built-in table of
// read-only commands, which ReadOnly falls back on.
func BuiltinReadOnly() iter.Seq[string] { return maps.Keys(builtinReadOnly) }

// lookup returns m[name in ASCII lower case], as the server looks names
// up; the conversion is made in a buffer on the stack for names of up to
// 32 bytes, which the map index does not copy.
func lookup(m map[string]bool, name string) (v, ok bool) {
	var buf [32]byte
	b := buf[:0]
	if len(name) > len(buf) {
		b = make([]byte, 0, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	v, ok = m[string(b)]
	return v, ok
}

// builtinReadOnly is the fallback for a server's command table: the
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
