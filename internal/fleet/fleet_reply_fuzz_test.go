package fleet

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/fleetseam"
)

// replyStore answers every EVALSHA with a fixed reply.
type replyStore struct{ reply []int64 }

func (replyStore) Load(context.Context, string) (string, error) { return "sha", nil }
func (s replyStore) EvalSHA(context.Context, string, []string, []string) ([]int64, error) {
	return s.reply, nil
}

// recorder is a counter that keeps what the engine set.
type recorder struct {
	a, b    int64
	lease   fleetseam.Lease
	got     bool
	cleared bool
}

func (r *recorder) local() (int64, int64) { return 5, 3 }
func (r *recorder) set(a, b int64, l fleetseam.Lease) {
	r.a, r.b, r.lease, r.got = a, b, l, true
}
func (r *recorder) clear() { r.cleared = true }

// FuzzSyncReply: whatever integers the store answers a sync with (any
// length, negative, huge), the engine never panics; it takes the fleet's
// counts only from a reply of the script's shape, and never sets a
// negative count.
func FuzzSyncReply(f *testing.F) {
	le := func(v ...int64) []byte {
		b := make([]byte, 8*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
		}
		return b
	}
	f.Add(le(1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20))
	f.Add(le(0, -1, -1, 1<<62, 1<<62, 1<<62, 1<<62, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
	f.Add(le(1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, -5))
	f.Add(le(1, 2))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		reply := make([]int64, len(in)/8)
		for i := range reply {
			reply[i] = int64(binary.LittleEndian.Uint64(in[8*i:]))
		}
		for _, budget := range []bool{false, true} {
			r := &recorder{}
			e := &Engine{cfg: Config{Name: "x", Prefix: "p", Interval: time.Second, Timeout: time.Second,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
				store: replyStore{reply}, ctr: r, kind: "budget", what: "budget", slot: time.Second,
				keys: Keys("p", "budget", 10*time.Second), token: "t", mark: "m", lastOK: time.Now()}
			want := 1 + 2*slots
			if budget { // a Budget's reply ends with its lease
				e.budget, e.ratio, e.reserve, e.life = &retry.Budget{}, 0.1, 10, time.Second
				want++
			}
			e.ctx, e.stop = context.WithCancel(context.Background())
			e.syncOnce()
			e.stop()
			if len(reply) != want {
				if r.got || e.Shared() {
					t.Fatalf("reply of %d values taken (budget %v)", len(reply), budget)
				}
				continue
			}
			if !r.got || r.a < 0 || r.b < 0 || r.lease.Retries < 0 {
				t.Fatalf("reply %v: set %v (%d, %d, lease %+v)", reply, r.got, r.a, r.b, r.lease)
			}
			if pushed := reply[0] == 1; pushed != (e.pushedA == 5 && e.pushedB == 3) {
				t.Fatalf("reply[0] = %d, pushed counts %d, %d", reply[0], e.pushedA, e.pushedB)
			}
		}
	})
}
