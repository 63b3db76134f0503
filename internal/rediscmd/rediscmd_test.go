package rediscmd

import (
	"strings"
	"testing"
)

func TestIdempotentWrite(t *testing.T) {
	for in, want := range map[string]bool{
		"SET k v": true, "set k NX": true, "SET k v EX 10": true, "SET k v PX 10 XX": true, "SET k v KEEPTTL": true,
		"SET k v NX": false, "SET k v ex 10 nx": false, "SET k v GET": false, "SET k v IFEQ x": false,
		"DEL a b": true, "HSET h f v": true, "INCR k": false, "LPUSH l x": false, "XADD s * f v": false,
		"EXPIRE k 10": true, "EXPIRE k 10 NX": false, "EXPIRE k 10 GT": true,
		"ZADD z 1 m": true, "ZADD z GT CH 1 m": true, "ZADD z INCR 1 m": false, "ZADD z NX 1 m": false,
		"ZADD z 1 NX": true, "EVAL x 0": false,
		// The server compares options as C strings: a word with a NUL byte
		// is read up to it ("NX\x00..." is NX); names are compared whole.
		"ZADD z NX\x00 1 m": false, "ZADD z incr\x00x 1 m": false, "ZADD z GT\x00 INCR 1 m": false,
		"ZADD z CH\x00 1 m": true, "EXPIRE k 10 nx\x00": false, "PEXPIRE k 10 NX\x00junk": false,
		"SET k v nx\x00": false, "SET k v EX\x00 10": true, "SET k v XX\x00 GET": false,
		"SET\x00 k v": false, "DEL\x00 k": false,
		// Case is ASCII only, as the server's strcasecmp: the long s (U+017F)
		// is not s, the Kelvin sign (U+212A) is not K.
		"\u017fet k v": false, "SET k v \u212aEEPTTL": false, "zAdD z nX 1 m": false, "eXpIrE k 1 Nx": false,
	} {
		w := strings.Fields(in)
		if got := IdempotentWrite(w[0], Strings(w[1:])); got != want {
			t.Errorf("IdempotentWrite(%q) = %v; want %v", in, got, want)
		}
	}
}

// An argument whose bytes are not known (ok false) may be any word: where
// an option may stand, it makes the command unsafe; where the server reads
// a number or a value, it changes nothing.
func TestIdempotentWriteUnknownArgument(t *testing.T) {
	for _, c := range []struct {
		in      string
		unknown int // index of the unknown argument after the name
		want    bool
	}{
		{"ZADD z ? 1 m", 1, false}, {"ZADD z XX ? 1 m", 2, false}, {"ZADD z 1 ?", 2, true},
		{"EXPIRE k 10 ?", 2, false}, {"EXPIRE k ?", 1, true},
		{"SET k v ?", 2, false}, {"SET k ?", 1, true}, {"SET k v EX ?", 3, true}, {"SET k v EX ? NX", 3, false},
		{"HSET h f ?", 2, true}, {"DEL ?", 0, true},
	} {
		w := strings.Fields(c.in)
		if got := IdempotentWrite(w[0], mixed{w[1:], 1 << c.unknown}); got != c.want {
			t.Errorf("IdempotentWrite(%q, argument %d unknown) = %v; want %v", c.in, c.unknown, got, c.want)
		}
	}
}

// Deciding allocates nothing, whatever the case of the words: retryvalkey
// asks before every command.
func TestIdempotentWriteAllocatesNothing(t *testing.T) {
	for _, in := range []string{"set k v ex 10 xx", "zadd z gt ch 1 m", "expire k 10 gt", "ping", "Echo x"} {
		w := strings.Fields(in)
		if n := testing.AllocsPerRun(100, func() { IdempotentWrite(w[0], Strings(w[1:])); Harmless(w[0]) }); n != 0 {
			t.Errorf("IdempotentWrite(%q): %v allocations; want 0", in, n)
		}
	}
}

func TestRefusal(t *testing.T) {
	for msg, want := range map[string]bool{
		"LOADING Redis is loading the dataset in memory":        true,
		"BUSY Redis is busy running a script":                   true,
		"TRYAGAIN Multiple keys request during rehashing":       true,
		"CLUSTERDOWN The cluster is down":                       true,
		"MASTERDOWN Link with MASTER is down":                   true,
		"READONLY You can't write against a read only replica.": true,
		"NOREPLICAS Not enough good replicas to write.":         true,
		"ERR max number of clients reached":                     true,
		"ERR unknown command":                                   false,
		"WRONGTYPE Operation against a key":                     false,
		"NOSCRIPT No matching script":                           false,
		"BUSYKEY Target key name already exists.":               false,
		"BUSYGROUP Consumer Group name already exists":          false,
		"EXECABORT Transaction discarded":                       false,
		"OOM command not allowed":                               false,
	} {
		if got := Refusal(msg); got != want {
			t.Errorf("Refusal(%q) = %v; want %v", msg, got, want)
		}
	}
	if !Harmless("ping") || Harmless("FLUSHALL") {
		t.Error("Harmless")
	}
}

// ReadOnly looks names up in any case, prefers the server's table, falls
// back on the built-in one, and allocates nothing for short names.
func TestReadOnly(t *testing.T) {
	server := map[string]bool{"get": false, "my.module.read": true}
	for _, c := range []struct {
		server map[string]bool
		name   string
		want   bool
	}{
		{nil, "GET", true}, {nil, "get", true}, {nil, "ZRangeByScore", true}, {nil, "INCR", false},
		{nil, "my.module.read", false}, {server, "GET", false}, {server, "MY.MODULE.READ", true},
		{server, "HGETALL", true}, // not in the server's table: the built-in one decides
		{nil, strings.Repeat("x", 40), false},
		// Longer than the stack buffer: still ASCII case only, as the
		// server; the Kelvin sign (U+212A, 3 bytes) is not k.
		{map[string]bool{strings.Repeat("k", 11): true}, strings.Repeat("\u212a", 11), false},
		{map[string]bool{strings.Repeat("k", 40): true}, strings.Repeat("K", 40), true},
	} {
		if got := ReadOnly(c.server, c.name); got != c.want {
			t.Errorf("ReadOnly(%v, %q) = %v; want %v", c.server, c.name, got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { ReadOnly(server, "ZREVRANGEBYSCORE") }); n != 0 {
		t.Errorf("ReadOnly allocates %v times; want 0", n)
	}
}
