package rediscmd

import (
	"strings"
	"testing"
)

// mixed is an Args whose argument i is not a string (a number, as go-redis
// passes them) when bit i of mask is set.
type mixed struct {
	w    []string
	mask uint64
}

func (m mixed) Len() int { return len(m.w) }
func (m mixed) Arg(i int) (string, bool) {
	if i < 64 && m.mask&(1<<i) != 0 {
		return "", false
	}
	return m.w[i], true
}

// asciiUpper upper-cases ASCII letters only, as the server compares names
// and options (strcasecmp).
func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// unsafeAsServerReads reports whether the server, reading the words as
// Redis 7 does, would run a write that is not idempotent: SET with NX, GET
// or an option it does not know, ZADD with NX or INCR among its leading
// options, EXPIRE with NX. ok is false for a name outside those three
// (nothing to check) or one the server does not know.
func unsafeAsServerReads(name string, a mixed) (unsafe, ok bool) {
	switch asciiUpper(name) {
	case "SET":
		for i := 2; i < a.Len(); i++ {
			s, isStr := a.Arg(i)
			if !isStr {
				return true, true // an option that is not a word: unknown
			}
			switch asciiUpper(s) {
			case "XX", "KEEPTTL":
			case "EX", "PX", "EXAT", "PXAT":
				i++
			default:
				return true, true
			}
		}
		return false, true
	case "ZADD":
		for i := 1; i < a.Len(); i++ {
			s, isStr := a.Arg(i)
			if !isStr {
				return false, true
			}
			switch asciiUpper(s) {
			case "XX", "GT", "LT", "CH":
			case "NX", "INCR":
				return true, true
			default:
				return false, true
			}
		}
		return false, true
	case "EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT":
		for i := 2; i < a.Len(); i++ {
			if s, isStr := a.Arg(i); isStr && asciiUpper(s) == "NX" {
				return true, true
			}
		}
		return false, true
	}
	return false, false
}

// FuzzIdempotentWrite: IdempotentWrite never panics, whatever the words
// and whichever arguments are not strings, and never calls a SET, ZADD or
// EXPIRE idempotent that the server would read with NX, GET or INCR.
func FuzzIdempotentWrite(f *testing.F) {
	for _, s := range []string{"SET k v", "SET k v EX 10 NX", "set k v px", "ZADD z GT CH 1 m", "ZADD z INCR 1 m",
		"EXPIRE k 10 NX", "SET k v KEEPTTL GET", "zadd z nx", "DEL a b", "SET", "ZADD", "EXPIRE k"} {
		f.Add(s, uint64(0))
	}
	f.Add("SET k v EX 10 NX", uint64(1<<3))
	f.Add("ZADD z 1 NX m", uint64(1<<1))
	f.Fuzz(func(t *testing.T, in string, mask uint64) {
		w := strings.Split(in, " ")
		name, args := w[0], mixed{w[1:], mask}
		got := IdempotentWrite(name, args)
		_ = IdempotentWrite(name, Strings(args.w))
		_ = Refusal(in)
		_ = Harmless(name)
		_ = ReadOnly(map[string]bool{"get": true}, name)
		if unsafe, ok := unsafeAsServerReads(name, args); ok && unsafe && got {
			t.Fatalf("IdempotentWrite(%q, non-strings %b) = true; the server would run it with NX, GET or INCR", in, mask)
		}
	})
}
