package retryvalkey_test

import (
	"context"
	"errors"
	"github.com/retrykit/retry"
	"testing"

	"github.com/retrykit/retry/internal/redistest"
)

// TestDoMulti: a pipeline of safe commands is repeated after a lost
// reply; one holding an INCR is not.
func TestDoMulti(t *testing.T) {
	srv := redistest.Start(t)
	c, _, fault := faultOnce(t, srv)
	ctx := context.Background()

	fault.Store("get")
	r := c.DoMulti(ctx, c.B().Set().Key("a").Value("1").Build(), c.B().Get().Key("a").Build())
	if v, err := r[1].ToString(); err != nil || v != "1" {
		t.Fatalf("safe pipeline after a lost reply: %q, %v", v, err)
	}

	fault.Store("get")
	before, _ := srv.CommandCalls("incr")
	r = c.DoMulti(ctx, c.B().Incr().Key("n").Build(), c.B().Get().Key("n").Build())
	if err := r[1].Error(); !errors.Is(err, retry.ErrMaybeApplied) {
		t.Fatalf("pipeline with INCR: %v; want retry.ErrMaybeApplied", err)
	}
	if after, _ := srv.CommandCalls("incr"); after-before != 1 {
		t.Fatalf("INCR ran %d times; want 1", after-before)
	}

	fault.Store("exec")
	r = c.DoMulti(ctx, c.B().Multi().Build(), c.B().Set().Key("b").Value("2").Build(), c.B().Exec().Build())
	if err := r[2].Error(); err != nil {
		t.Fatalf("MULTI SET EXEC after a lost reply: %v", err)
	}
	if n, _ := srv.CommandCalls("exec"); n != 2 {
		t.Fatalf("EXEC ran %d times; want 2 (lost, repeated)", n)
	}
}
