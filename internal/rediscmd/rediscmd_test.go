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
	} {
		w := strings.Fields(in)
		if got := IdempotentWrite(w[0], Strings(w[1:])); got != want {
			t.Errorf("IdempotentWrite(%q) = %v; want %v", in, got, want)
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
	} {
		if got := ReadOnly(c.server, c.name); got != c.want {
			t.Errorf("ReadOnly(%v, %q) = %v; want %v", c.server, c.name, got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { ReadOnly(server, "ZREVRANGEBYSCORE") }); n != 0 {
		t.Errorf("ReadOnly allocates %v times; want 0", n)
	}
}
