package retryredis

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
)

// wireLog keeps the commands that go-redis wrote to the recorders of one
// client, each as its words.
type wireLog struct {
	mu       sync.Mutex
	commands [][]string
}

func (l *wireLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.commands)
}

func (l *wireLog) last() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.commands[len(l.commands)-1]
}

// recorder is a net.Conn that stands for a server: it reads the RESP
// commands written to it (arrays of bulk strings, what go-redis writes)
// and answers each at once: HELLO, the handshake, with an error (go-redis
// then speaks RESP2 without it), any other with +OK, kept in its log. Reading with no
// answer due returns io.EOF.
type recorder struct {
	log *wireLog
	mu  sync.Mutex
	in  bytes.Buffer // written, not yet a whole command
	out bytes.Buffer // answers not yet read
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.in.Write(p)
	for {
		words, n, ok := parseCommand(r.in.Bytes())
		if !ok {
			return len(p), nil
		}
		r.in.Next(n)
		if strings.EqualFold(words[0], "hello") { // the handshake, not logged
			r.out.WriteString("-ERR unknown command 'HELLO'\r\n")
			continue
		}
		r.log.mu.Lock()
		r.log.commands = append(r.log.commands, words)
		r.log.mu.Unlock()
		r.out.WriteString("+OK\r\n")
	}
}

func (r *recorder) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.out.Len() == 0 {
		return 0, io.EOF
	}
	return r.out.Read(p)
}

func (r *recorder) Close() error                     { return nil }
func (r *recorder) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (r *recorder) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6379} }
func (r *recorder) SetDeadline(time.Time) error      { return nil }
func (r *recorder) SetReadDeadline(time.Time) error  { return nil }
func (r *recorder) SetWriteDeadline(time.Time) error { return nil }

// parseCommand reads one whole command (*N then N bulk strings) from the
// start of b: its words and length, or ok false when b holds less than a
// whole command.
func parseCommand(b []byte) (words []string, n int, ok bool) {
	r := bufio.NewReader(bytes.NewReader(b))
	line := func(prefix byte) (int, bool) {
		l, err := r.ReadString('\n')
		if err != nil || len(l) < 3 || l[0] != prefix {
			return 0, false
		}
		n += len(l)
		v, err := strconv.Atoi(strings.TrimSuffix(l[1:], "\r\n"))
		return v, err == nil
	}
	count, ok := line('*')
	if !ok {
		return nil, 0, false
	}
	for range count {
		size, ok := line('$')
		if !ok {
			return nil, 0, false
		}
		w := make([]byte, size+2)
		if _, err := io.ReadFull(r, w); err != nil {
			return nil, 0, false
		}
		n += len(w)
		words = append(words, string(w[:size]))
	}
	return words, n, count > 0
}

// marshaler writes its word with MarshalBinary (as go-redis does) and
// shows another with String (as go-redis's Cmd.Name does).
type marshaler struct{ word string }

func (m marshaler) MarshalBinary() ([]byte, error) { return []byte(m.word), nil }
func (m marshaler) String() string                 { return "get" }

// failing is a BinaryMarshaler that always fails.
type failing struct{}

func (failing) MarshalBinary() ([]byte, error) { return nil, errors.New("failing: no bytes") }

// named is a string type go-redis does not know.
type named string

// shapes gives each argument type that go-redis's writer accepts, and a
// few it refuses, from a word and two numbers.
var shapes = []func(w string, n int64, x float64) any{
	func(w string, n int64, x float64) any { return w },
	func(w string, n int64, x float64) any { return &w },
	func(w string, n int64, x float64) any { return (*string)(nil) },
	func(w string, n int64, x float64) any { return []byte(w) },
	func(w string, n int64, x float64) any { return net.IP(w) },
	func(w string, n int64, x float64) any { return marshaler{w} },
	func(w string, n int64, x float64) any { return &marshaler{w} },
	func(w string, n int64, x float64) any { return failing{} },
	func(w string, n int64, x float64) any { return nil },
	func(w string, n int64, x float64) any { return int(n) },
	func(w string, n int64, x float64) any { v := int(n); return &v },
	func(w string, n int64, x float64) any { return (*int)(nil) },
	func(w string, n int64, x float64) any { return int8(n) },
	func(w string, n int64, x float64) any { v := int8(n); return &v },
	func(w string, n int64, x float64) any { return int16(n) },
	func(w string, n int64, x float64) any { v := int16(n); return &v },
	func(w string, n int64, x float64) any { return int32(n) },
	func(w string, n int64, x float64) any { v := int32(n); return &v },
	func(w string, n int64, x float64) any { return n },
	func(w string, n int64, x float64) any { return &n },
	func(w string, n int64, x float64) any { return uint(n) },
	func(w string, n int64, x float64) any { v := uint(n); return &v },
	func(w string, n int64, x float64) any { return uint8(n) },
	func(w string, n int64, x float64) any { v := uint8(n); return &v },
	func(w string, n int64, x float64) any { return uint16(n) },
	func(w string, n int64, x float64) any { v := uint16(n); return &v },
	func(w string, n int64, x float64) any { return uint32(n) },
	func(w string, n int64, x float64) any { v := uint32(n); return &v },
	func(w string, n int64, x float64) any { return uint64(n) },
	func(w string, n int64, x float64) any { v := uint64(n); return &v },
	func(w string, n int64, x float64) any { return (*uint64)(nil) },
	func(w string, n int64, x float64) any { return uintptr(n) },
	func(w string, n int64, x float64) any { v := uintptr(n); return &v },
	func(w string, n int64, x float64) any { return float32(x) },
	func(w string, n int64, x float64) any { v := float32(x); return &v },
	func(w string, n int64, x float64) any { return x },
	func(w string, n int64, x float64) any { return &x },
	func(w string, n int64, x float64) any { return (*float64)(nil) },
	func(w string, n int64, x float64) any { return n%2 != 0 },
	func(w string, n int64, x float64) any { v := n%2 == 0; return &v },
	func(w string, n int64, x float64) any { return (*bool)(nil) },
	func(w string, n int64, x float64) any {
		return time.Unix(0, n).In(time.FixedZone("z", int(n%(14*3600))))
	},
	func(w string, n int64, x float64) any { v := time.Unix(0, n).UTC(); return &v },
	func(w string, n int64, x float64) any { return (*time.Time)(nil) },
	func(w string, n int64, x float64) any { return time.Duration(n) },
	func(w string, n int64, x float64) any { v := time.Duration(n); return &v },
	func(w string, n int64, x float64) any { return []string{w} },
	func(w string, n int64, x float64) any { return named(w) },
	func(w string, n int64, x float64) any { return struct{}{} },
}

// commandNames are the names the fuzz target sends: the commands whose
// arguments decide, and others.
var commandNames = []string{"set", "zadd", "expire", "pexpire", "expireat", "pexpireat", "SET", "ZaDd", "eXpIrE",
	"get", "incr", "del", "hset", "ping", "echo", "lpush", "unknown.cmd"}

// FuzzWireClassification: whatever the types of a command's arguments,
// the classification sees each as go-redis's own writer puts it on the
// wire. Each command is written by a go-redis client to a recorder:
//   - when go-redis wrote it, wire renders every argument as the bytes the
//     recorder read, and the verdict on the typed arguments (safe to
//     repeat or not) equals the verdict on the written words as strings;
//   - when it did not, an argument's type was refused (then judge says
//     "not sent" and does not retry) or a MarshalBinary failed (then the
//     verdict is safe only if it would be whatever that argument was).
func FuzzWireClassification(f *testing.F) {
	f.Add(uint8(1), "z NX 1 m", []byte{0, 3, 0, 9, 0}, int64(1), 1.5)
	f.Add(uint8(1), "z INCR 1 m", []byte{0, 0, 1, 9, 0}, int64(1), 1.5)
	f.Add(uint8(2), "k 10 nx", []byte{0, 0, 9, 3}, int64(10), 0.0)
	f.Add(uint8(0), "k v EX 10 XX", []byte{0, 0, 0, 0, 9, 5}, int64(10), 0.0)
	f.Add(uint8(1), "z GT 1 m", []byte{0, 0, 4, 35, 5}, int64(-3), -0.25)
	f.Add(uint8(1), "z x 1 m", []byte{0, 0, 7, 35, 5}, int64(0), 1e21)
	f.Add(uint8(9), "k", []byte{5, 46}, int64(0), 0.0)
	f.Add(uint8(10), "k", []byte{0, 41, 44, 47}, int64(1e18), 3.4e38)
	log := &wireLog{}
	c := redis.NewClient(&redis.Options{
		Addr: "127.0.0.1:6379", MaxRetries: -1, DialerRetries: 1, PoolSize: 1, Protocol: 2, DisableIdentity: true,
		Dialer: func(context.Context, string, string) (net.Conn, error) { return &recorder{log: log}, nil },
	})
	defer c.Close()
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, nameSel uint8, in string, kinds []byte, n int64, x float64) {
		words := strings.Split(in, " ")
		if len(words) > 8 {
			words = words[:8]
		}
		kind := func(i int) func(string, int64, float64) any {
			if i < len(kinds) {
				return shapes[int(kinds[i])%len(shapes)]
			}
			return shapes[0]
		}
		typed := []any{kind(0)(commandNames[int(nameSel)%len(commandNames)], n, x)}
		for i, w := range words {
			typed = append(typed, kind(i+1)(w, n+int64(i), x*float64(i)))
		}
		var refused, unknown bool
		for _, v := range typed {
			switch _, st := wire(v); st {
			case argRefused:
				refused = true
			case argUnknown:
				unknown = true
			}
		}

		before := log.count()
		cmd := redis.NewCmd(ctx, typed...)
		err := c.Process(ctx, cmd)
		var tbl commandTable
		if log.count() > before {
			if err != nil {
				t.Fatalf("%v: written, but %v", typed, err)
			}
			written := log.last()
			if refused || unknown || len(written) != len(typed) {
				t.Fatalf("%v: written as %q; wire says refused %v, unknown %v", typed, written, refused, unknown)
			}
			asStrings := make([]any, len(written))
			for i, v := range typed {
				if s, _ := wire(v); s != written[i] {
					t.Fatalf("argument %d (%T %v): wire renders %q; go-redis wrote %q", i, v, v, s, written[i])
				}
				asStrings[i] = written[i]
			}
			if got, want := tbl.safe(ctx, cmd), tbl.safe(ctx, redis.NewCmd(ctx, asStrings...)); got != want {
				t.Fatalf("%v, written as %q: safe %v; the written words are safe %v", typed, written, got, want)
			}
			return
		}
		if err == nil || !refused && !unknown {
			t.Fatalf("%v: not written (error %v), but wire says refused %v, unknown %v", typed, err, refused, unknown)
		}
		var applied bool
		judged := (&hook{policy: retry.Policy{}}).judge(ctx, err, cmd, &applied)
		if notSent := errors.Is(judged, retry.ErrNotSent) && retry.IsPermanent(judged); notSent != refused {
			t.Fatalf("%v: refused %v, but judge says %v", typed, refused, judged)
		}
		if refused || !tbl.safe(ctx, cmd) {
			return
		}
		// Safe although an argument's bytes are not known: it must be safe
		// whatever the unknown arguments are.
		for _, w := range []string{"NX", "INCR", "GET", "XX", "1"} {
			as := make([]any, len(typed))
			for i, v := range typed {
				s, st := wire(v)
				if st == argUnknown {
					s = w
				}
				as[i] = s
			}
			if !tbl.safe(ctx, redis.NewCmd(ctx, as...)) {
				t.Fatalf("%v: safe with an unknown argument, but not when it is %q", typed, w)
			}
		}
	})
}
