package redistest

// Start retries on another port whatever took the one it was given
// between freePort's release and redis-server's bind (a test's own
// listener, a busy redis-server), not only another redis-server that
// answers INFO.

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

func TestPortTakenByOtherListenerIsRetried(t *testing.T) {
	bin := Binary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0") // the process that won the race for the port
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	s := &Server{tb: t, bin: bin, dir: t.TempDir(), port: l.Addr().(*net.TCPAddr).Port}
	err = s.start()
	if err == nil {
		s.Stop()
		t.Fatal("start succeeded on a port another process listens on")
	}
	if !errors.Is(err, errPortTaken) {
		t.Errorf("start on a port another (non-redis) process took: %v; want errPortTaken, so that Start tries another port", err)
	}
}

// The same with another test's redis-server on the port, busy in a script
// as this repository's tests make theirs (busy-reply-threshold + SlowIncr):
// it answers INFO with -BUSY, serverPID fails, and start reports "exited
// at start" instead of errPortTaken.
func TestPortTakenByBusyRedisIsRetried(t *testing.T) {
	other := Start(t)
	if _, err := other.Do("CONFIG", "SET", "busy-reply-threshold", "10"); err != nil {
		t.Fatal(err)
	}
	const busy2s = `local t0 = redis.call('TIME')
local s = t0[1]*1000000 + t0[2]
while true do local t = redis.call('TIME'); if t[1]*1000000 + t[2] - s > 2000000 then break end end
return 1`
	done := make(chan struct{})
	go func() { defer close(done); other.Do("EVAL", busy2s, "0") }()
	defer func() { <-done }()
	time.Sleep(100 * time.Millisecond) // the script runs, past the threshold
	if _, err := other.Do("PING"); err == nil || !strings.HasPrefix(err.Error(), "BUSY") {
		t.Fatalf("PING to the busy server: %v, want BUSY", err)
	}
	s := &Server{tb: t, bin: other.bin, dir: t.TempDir(), port: other.port}
	err := s.start()
	if err == nil {
		s.Stop()
		t.Fatal("start succeeded on the port of another running redis-server")
	}
	if !errors.Is(err, errPortTaken) {
		t.Errorf("start on a port another test's (busy) redis-server holds: %v; want errPortTaken, so that Start tries another port", err)
	}
}
