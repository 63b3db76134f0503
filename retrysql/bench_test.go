package retrysql_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/paired"
	"github.com/retrykit/retry/retrysql"
)

// txBench is a small transaction on one connection, bare and through a
// Runner with the zero Policy.
type txBench struct {
	conn *pgx.Conn
	r    *retrysql.Runner
	fn   func(context.Context, pgx.Tx) error
}

func newTxBench(tb testing.TB) *txBench {
	s := startPG(tb)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, newDB(tb, s))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close(context.Background()) })
	r, err := retrysql.New(retry.Policy{})
	if err != nil {
		tb.Fatal(err)
	}
	return &txBench{conn: conn, r: r, fn: func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT 1`)
		return err
	}}
}

func (b *txBench) bare(tb testing.TB) func() {
	ctx := context.Background()
	return func() {
		tx, err := b.conn.BeginTx(ctx, pgx.TxOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		if err := b.fn(ctx, tx); err != nil {
			tb.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			tb.Fatal(err)
		}
	}
}

func (b *txBench) wrapped(tb testing.TB) func() {
	ctx := context.Background()
	return func() {
		if err := b.r.PgxTx(ctx, b.conn, b.fn); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkTxPaired measures what a Runner adds to a successful
// transaction (BEGIN, SELECT 1, COMMIT over loopback on one pgx.Conn) as
// a share of it, with internal/paired: each of b.N rounds runs blocks of
// 20 transactions bare and through PgxTx, interleaved (ABBA BAAB):
//
//	cd retrysql && RETRYKIT_REQUIRE_POSTGRES=1 go test -run '^$' -bench TxPaired -benchtime 200x -v .
func BenchmarkTxPaired(b *testing.B) {
	tb := newTxBench(b)
	b.Run("vs=bare", func(b *testing.B) { paired.Measure(max(b.N, 10), 20, tb.bare(b), tb.wrapped(b)).Report(b) })
	// The control: bare against bare shows the method's own error.
	b.Run("vs=bare-again", func(b *testing.B) { paired.Measure(max(b.N, 10), 20, tb.bare(b), tb.bare(b)).Report(b) })
}

// BenchmarkTx reports time and allocations of one transaction, bare and
// through PgxTx (compare their allocs/op: what the Runner adds).
func BenchmarkTx(b *testing.B) {
	tb := newTxBench(b)
	for _, c := range []struct {
		name string
		f    func(testing.TB) func()
	}{{"bare", tb.bare}, {"retrysql", tb.wrapped}} {
		b.Run(c.name, func(b *testing.B) {
			f := c.f(b)
			b.ReportAllocs()
			for b.Loop() {
				f()
			}
		})
	}
}

// TestTxAllocs: a successful transaction through PgxTx allocates no more
// than the bare one.
func TestTxAllocs(t *testing.T) {
	tb := newTxBench(t)
	bare := testing.AllocsPerRun(200, tb.bare(t))
	wrapped := testing.AllocsPerRun(200, tb.wrapped(t))
	t.Logf("allocations per transaction: bare pgx %.1f, through PgxTx %.1f", bare, wrapped)
	if wrapped > bare {
		t.Errorf("PgxTx adds %.1f allocations to a successful transaction (bare %.1f, wrapped %.1f)", wrapped-bare, bare, wrapped)
	}
}
