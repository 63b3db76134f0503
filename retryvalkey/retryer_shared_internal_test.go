package retryvalkey

import (
	"context"
	"errors"
	"testing"

	"github.com/retrykit/retry"
)

// TestDelaySharedCommand: valkey-go's loop does not repeat a command that
// two calls registered (delay cannot tell whose repeat it is), the Loops
// of both are left alone, and both calls know that they must send it again
// themselves; a command no call registered is not repeated either. Once
// both calls ended, nothing is left of it, in its bucket or in the map.
func TestDelaySharedCommand(t *testing.T) {
	b := bareClient(t)
	cmd := b.B().Get().Key("k").Build().Pin()
	r := &retryer{p: retry.Policy{}}
	ctx := context.Background()
	lost := errors.New("connection reset")
	if d := r.delay(1, cmd, lost); d >= 0 {
		t.Fatalf("a command no call registered: delay %v, want -1", d)
	}
	k1, k2 := keep(&cmd), keep(&cmd)
	defer k1.release()
	defer k2.release()
	c1 := r.begin(ctx, k1, false)
	r.register(c1, &cmd)
	if c1.shared.Load() {
		t.Fatal("one call registered the command: shared")
	}
	c2 := r.begin(ctx, k2, false)
	r.register(c2, &cmd)
	if d := r.delay(1, cmd, lost); d >= 0 {
		t.Fatalf("two calls registered the command: delay %v, want -1", d)
	}
	if !c1.shared.Load() || !c2.shared.Load() {
		t.Fatalf("two calls registered the command: shared %v and %v, want both", c1.shared.Load(), c2.shared.Load())
	}
	if c1.l.Attempts() != 0 || c2.l.Attempts() != 0 {
		t.Fatalf("attempts %d and %d; want the Loops left alone", c1.l.Attempts(), c2.l.Attempts())
	}
	r.end(c1)
	r.end(c2)
	if b := r.of(&cmd.Commands()[0]); b.k != nil || b.more != 0 || len(r.calls) != 0 {
		t.Fatalf("both calls ended: the bucket holds %p and %d words in the map (%d); want nothing", b.k, b.more, len(r.calls))
	}
}
