package retryvalkey

import (
	"strings"
	"testing"
)

func TestIdempotent(t *testing.T) {
	for in, want := range map[string]bool{
		"SET k v": true, "SET k NX": true, "SET k v EX 10": true, "SET k v PX 10 XX": true, "SET k v KEEPTTL": true,
		"SET k v NX": false, "SET k v GET": false, "SET k v IFEQ x": false,
		"DEL a b": true, "HSET h f v": true, "INCR k": false, "LPUSH l x": false, "XADD s * f v": false,
		"EXPIRE k 10": true, "EXPIRE k 10 NX": false, "ZADD z 1 m": true, "ZADD z GT CH 1 m": true,
		"ZADD z INCR 1 m": false, "ZADD z NX 1 m": false, "ZADD z 1 NX": true, "": false,
	} {
		if got := idempotent(strings.Fields(in)); got != want {
			t.Errorf("idempotent(%q) = %v; want %v", in, got, want)
		}
	}
	if !idempotent([]string{"PING"}) || idempotent([]string{"FLUSHALL"}) {
		t.Error("PING should count, FLUSHALL not")
	}
}
