package retryotel_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retryotel"
)

// Three calls: one won by its first copy before the delay, one won by its
// hedge, one whose hedge the Budget refuses.
func TestInstrumentHedges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp, r := newMeter(t)
		h, err := retry.NewHedger(retry.HedgeConfig{FixedDelay: 10 * time.Millisecond, MaxCopies: 2})
		if err != nil {
			t.Fatal(err)
		}
		p := retryotel.Instrument(retry.Policy{}, "op", retryotel.WithMeterProvider(mp))
		slowFirst := func(first time.Duration) func(context.Context) error {
			return func(ctx context.Context) error {
				d := time.Millisecond
				if retry.HedgeAttempt(ctx) == 1 {
					d = first
				}
				select {
				case <-time.After(d):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		ctx := context.Background()
		retry.Hedge(ctx, p, h, slowFirst(time.Millisecond)) // no hedge
		retry.Hedge(ctx, p, h, slowFirst(time.Second))      // hedge sent and won
		b, _ := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: -1})
		pb := p
		pb.Budget = b
		retry.Hedge(ctx, pb, h, slowFirst(50*time.Millisecond)) // hedge refused
		c := collect(t, r)
		for _, m := range []struct {
			name string
			want int64
		}{{"retry.hedge.sent", 1}, {"retry.hedge.won", 1}, {"retry.hedge.refused", 1}} {
			if v, total := c.counter(m.name, opAttr); v != m.want || total != m.want {
				t.Errorf("%s = %d (total %d), want %d", m.name, v, total, m.want)
			}
		}
		if count, sum := c.hist("retry.call.attempts", opAttr); count != 3 || sum != 4 {
			t.Errorf("retry.call.attempts: %d calls, %v attempts; want 3 calls, 4 attempts", count, sum)
		}
	})
}

// A retryhttp.Transport with a Hedge over NewAttemptTransport: one client
// span per copy, the hedge's with http.request.resend_count 1, the hedge
// counters and a retry.hedge event on the caller's span.
func TestAttemptTransportHedges(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(retryhttp.HeaderAttempt) == "" {
			<-r.Context().Done() // the first copy hangs until it loses
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	mp, reader := newMeter(t)
	tp, sr := newTracer(t)
	h, err := retry.NewHedger(retry.HedgeConfig{FixedDelay: 20 * time.Millisecond, MaxCopies: 2})
	if err != nil {
		t.Fatal(err)
	}
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	rt := otelTransport(base, retry.Policy{}, retryotel.WithMeterProvider(mp), retryotel.WithTracerProvider(tp))
	rt.Hedge = h
	ctx, parent := tp.Tracer("test").Start(context.Background(), "caller")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	parent.End()

	spans := clientSpans(sr.Ended())
	var resend []int64
	for _, s := range spans {
		rc, _ := resendCount(s)
		resend = append(resend, rc)
	}
	if len(spans) != 2 || !slices.Contains(resend, 1) || !slices.Contains(resend, 0) {
		t.Errorf("%d client spans with resend counts %v (0: absent); want 2, one of them 1", len(spans), resend)
	}
	c := collect(t, reader)
	op := retryotel.AttrOperation.String("http")
	if sent, _ := c.counter("retry.hedge.sent", op); sent != 1 {
		t.Errorf("retry.hedge.sent = %d, want 1", sent)
	}
	if won, _ := c.counter("retry.hedge.won", op); won != 1 {
		t.Errorf("retry.hedge.won = %d, want 1", won)
	}
	events := 0
	for _, s := range sr.Ended() {
		if s.Name() == "caller" {
			for _, e := range s.Events() {
				if e.Name == "retry.hedge" {
					events++
				}
			}
		}
	}
	if events != 1 {
		t.Errorf("%d retry.hedge events on the caller's span, want 1", events)
	}
}
