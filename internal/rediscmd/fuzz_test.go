package rediscmd

import (
	"strings"
	"testing"
)

// mixed is an Args whose argument i is not known (ok false: it may be any
// word) when bit i of mask is set.
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

// cOption is word as the server reads an option: a C string (up to the
// first NUL byte), in ASCII upper case.
func cOption(word string) string {
	word, _, _ = strings.Cut(word, "\x00")
	return asciiUpper(word)
}

// unsafeAsServerReads reports whether the server, reading the words as
// Redis 7 does, may run a write that is not idempotent: SET with NX, GET
// or an option it does not know, ZADD with NX or INCR among its leading
// options, EXPIRE with NX; an argument that is not known may be any of
// them. ok is false for a name outside those three (nothing to check) or
// one the server does not know.
func unsafeAsServerReads(name string, a mixed) (unsafe, ok bool) {
	switch asciiUpper(name) {
	case "SET":
		for i := 2; i < a.Len(); i++ {
			s, known := a.Arg(i)
			if !known {
				return true, true // it may be NX
			}
			switch cOption(s) {
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
			s, known := a.Arg(i)
			if !known {
				return true, true // it may be NX
			}
			switch cOption(s) {
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
			if s, known := a.Arg(i); !known || cOption(s) == "NX" {
				return true, true
			}
		}
		return false, true
	}
	return false, false
}

// FuzzIdempotentWrite: IdempotentWrite never panics, whatever the words
// and whichever arguments are not known, and calls a SET, ZADD or EXPIRE
// idempotent exactly when the server cannot read it with NX, GET, INCR or
// an unknown option.
func FuzzIdempotentWrite(f *testing.F) {
	for _, s := range []string{"SET k v", "SET k v EX 10 NX", "set k v px", "ZADD z GT CH 1 m", "ZADD z INCR 1 m",
		"EXPIRE k 10 NX", "SET k v KEEPTTL GET", "zadd z nx", "DEL a b", "SET", "ZADD", "EXPIRE k"} {
		f.Add(s, uint64(0))
	}
	f.Add("SET k v EX 10 NX", uint64(1<<3))
	f.Add("ZADD z 1 NX m", uint64(1<<1))
	f.Add("ZADD z GT\x00 INCR 1 m", uint64(0))
	f.Add("EXPIRE k 10 nx\x00x", uint64(0))
	f.Fuzz(func(t *testing.T, in string, mask uint64) {
		w := strings.Split(in, " ")
		name, args := w[0], mixed{w[1:], mask}
		got := IdempotentWrite(name, args)
		_ = IdempotentWrite(name, Strings(args.w))
		_ = Refusal(in)
		_ = Harmless(name)
		_ = ReadOnly(map[string]bool{"get": true}, name)
		if unsafe, ok := unsafeAsServerReads(name, args); ok && unsafe == got {
			t.Fatalf("IdempotentWrite(%q, unknown %b) = %v; the server reads it as unsafe: %v", in, mask, got, unsafe)
		}
	})
}
