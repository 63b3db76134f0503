package retryredis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/internal/rediscmd"
)

func TestSafe(t *testing.T) {
	ctx := context.Background()
	var tbl commandTable
	for _, tc := range []struct {
		args []any
		safe bool
	}{
		{[]any{"get", "k"}, true},
		{[]any{"GET", "k"}, true},
		{[]any{"ping"}, true},
		{[]any{"incr", "k"}, false},
		{[]any{"lpush", "k", "v"}, false},
		{[]any{"xadd", "s", "*", "f", "v"}, false},
		{[]any{"eval", "return 1", 0}, false},
		{[]any{"set", "k", "v"}, true},
		{[]any{"set", "k", "NX"}, true}, // NX is the value here
		{[]any{"set", "k", "v", "ex", int64(10)}, true},
		{[]any{"set", "k", "v", "px", int64(10), "xx"}, true},
		{[]any{"set", "k", "v", "keepttl"}, true},
		{[]any{"set", "k", "v", "nx"}, false},
		{[]any{"set", "k", "v", "ex", int64(10), "nx"}, false},
		{[]any{"set", "k", "v", "get"}, false},
		{[]any{"set", "k", "v", "ifeq", "x"}, false},
		{[]any{"del", "a", "b"}, true},
		{[]any{"hset", "h", "f", "v"}, true},
		{[]any{"expire", "k", int64(10)}, true},
		{[]any{"expire", "k", int64(10), "nx"}, false},
		{[]any{"expire", "k", int64(10), "gt"}, true},
		{[]any{"zadd", "z", 1.0, "m"}, true},
		{[]any{"zadd", "z", "gt", "ch", 1.0, "m"}, true},
		{[]any{"zadd", "z", "incr", 1.0, "m"}, false},
		{[]any{"zadd", "z", "nx", 1.0, "m"}, false},
		{[]any{"zadd", "z", 1.0, "nx"}, true}, // member named nx
	} {
		cmd := redis.NewCmd(ctx, tc.args...)
		if got := tbl.safe(ctx, cmd); got != tc.safe {
			t.Errorf("safe(%v) = %v; want %v", tc.args, got, tc.safe)
		}
	}
	if !tbl.safe(MarkSafe(ctx), redis.NewCmd(ctx, "incr", "k")) {
		t.Error("MarkSafe ignored")
	}
	tbl.extra = map[string]bool{"incr": true}
	if !tbl.safe(ctx, redis.NewCmd(ctx, "incr", "k")) {
		t.Error("WithIdempotent ignored")
	}
	// The server's table wins over the built-in one.
	ro := map[string]bool{"get": false, "mymodule.read": true}
	tbl.readOnly.Store(&ro)
	if tbl.safe(ctx, redis.NewCmd(ctx, "get", "k")) || !tbl.safe(ctx, redis.NewCmd(ctx, "mymodule.read")) {
		t.Error("server command table not used")
	}
	if !tbl.allSafe(ctx, []redis.Cmder{redis.NewCmd(ctx, "multi"), redis.NewCmd(ctx, "set", "k", "v"), redis.NewCmd(ctx, "exec")}) {
		t.Error("MULTI SET EXEC not safe")
	}
}

func TestClassify(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	write := &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}
	read := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	for _, tc := range []struct {
		err      error
		pipeline bool
		want     rediscmd.Outcome
	}{
		{dial, false, rediscmd.OutcomeNotSent},
		{fmt.Errorf("redis: connection pool: %w", dial), false, rediscmd.OutcomeNotSent},
		{redis.ErrPoolTimeout, false, rediscmd.OutcomeNotSent},
		{write, false, rediscmd.OutcomeNotSent},
		{write, true, rediscmd.OutcomeMaybeApplied},
		{read, false, rediscmd.OutcomeMaybeApplied},
		{io.EOF, false, rediscmd.OutcomeMaybeApplied},
		{&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, false, rediscmd.OutcomeMaybeApplied},
		{context.DeadlineExceeded, false, rediscmd.OutcomeMaybeApplied},
		{errors.New("something else"), false, rediscmd.OutcomeMaybeApplied},
		{redis.ErrClosed, false, rediscmd.OutcomeFinal},
	} {
		if got := classify(tc.err, tc.pipeline); got != tc.want {
			t.Errorf("classify(%v, %v) = %v; want %v", tc.err, tc.pipeline, got, tc.want)
		}
	}
}
