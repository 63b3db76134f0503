package retryredis_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retrytest"
)

// TestUnwritableArgument: go-redis refuses to write an argument of a type
// it does not know (a []string, a struct), so nothing of the command
// reaches the server: the call fails at its first attempt with retry.ErrNotSent,
// for a command safe to repeat (GET) and for one that is not (INCR), and
// for pipelines. A plain pipeline whose later command is refused may have
// written the earlier ones: it is not repeated either, and may have been
// applied.
func TestUnwritableArgument(t *testing.T) {
	srv := redistest.Start(t)
	var rec retrytest.Recorder
	p := testPolicy()
	p.Observer = &rec
	c := newClient(t, srv.Addr(), p)
	ctx := context.Background()
	bad := []string{"k"}
	for _, tc := range []struct {
		name    string
		call    func() error
		notSent bool
	}{
		{"GET", func() error { return c.Do(ctx, "get", bad).Err() }, true},
		{"INCR", func() error { return c.Do(ctx, "incr", struct{ K string }{"k"}).Err() }, true},
		{"pipeline first", func() error {
			_, err := c.Pipelined(ctx, func(pl redis.Pipeliner) error {
				pl.Do(ctx, "incr", bad)
				pl.Get(ctx, "k")
				return nil
			})
			return err
		}, true},
		{"transaction", func() error {
			_, err := c.TxPipelined(ctx, func(pl redis.Pipeliner) error {
				pl.Incr(ctx, "k")
				pl.Do(ctx, "get", bad)
				return nil
			})
			return err
		}, true},
		{"pipeline later", func() error {
			_, err := c.Pipelined(ctx, func(pl redis.Pipeliner) error {
				pl.Get(ctx, "k")
				pl.Do(ctx, "get", bad)
				return nil
			})
			return err
		}, false},
	} {
		rec.Reset()
		err := tc.call()
		var re *retry.Error
		if !errors.As(err, &re) || re.Attempts != 1 || rec.Attempts() != 1 {
			t.Errorf("%s: %v after %d attempts; want the call to end after 1", tc.name, err, rec.Attempts())
		}
		if errors.Is(err, retry.ErrNotSent) != tc.notSent || errors.Is(err, retry.ErrMaybeApplied) == tc.notSent {
			t.Errorf("%s: %v; want retry.ErrNotSent %v, retry.ErrMaybeApplied %v", tc.name, err, tc.notSent, !tc.notSent)
		}
		if err == nil || !strings.Contains(err.Error(), "can't marshal") {
			t.Errorf("%s: %v; want go-redis's error naming the type", tc.name, err)
		}
	}
	if n, _ := srv.CommandCalls("incr"); n != 0 {
		t.Errorf("the server ran INCR %d times; want 0", n)
	}
}
