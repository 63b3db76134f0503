package inventory_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/examples/inventory"
	"github.com/retrykit/retry/retrytest"
)

// The service's retry behaviour, tested with the kit only: a scripted
// backend in place of the network, a Recorder for what the loop did, a
// seed for exact waits, and synctest's clock, so that minutes of waits
// take microseconds.

func TestStockRetriedThroughAnOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		backend := retrytest.NewBackend(
			retrytest.Reply{Status: http.StatusServiceUnavailable},
			retrytest.Reply{Status: http.StatusServiceUnavailable},
			retrytest.Reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"30"}}},
			retrytest.Reply{Body: "7"},
		)
		var rec retrytest.Recorder
		policy := retry.Policy{Observer: &rec} // the reference schedule: 1 s, 2 s, 4 s, … plus jitter
		c := inventory.New("http://inventory.test", backend, policy)
		ctx := retrytest.Seed(t.Context(), 1)
		start := time.Now()

		n, err := c.Stock(ctx, "apple")

		if err != nil || n != 7 {
			t.Fatalf("Stock = %d, %v; want 7", n, err)
		}
		// The computed waits are exact under the seed; the server's 30 s
		// wins over the third, and retryhttp adds up to a tenth of it (at
		// most 1 s) so that clients told the same wait do not return together.
		s, err := retrytest.Schedule(policy, 1)
		if err != nil {
			t.Fatal(err)
		}
		got := rec.Waits()
		if len(got) != 3 || !slices.Equal(got[:2], s[:2]) || got[2] < 30*time.Second || got[2] > 31*time.Second {
			t.Fatalf("waits %v; want %v then 30s to 31s", got, s[:2])
		}
		if took := time.Since(start); took != got[0]+got[1]+got[2] {
			t.Fatalf("took %v; want the waits' sum", took)
		}
		if got := backend.Count("GET http://inventory.test/stock/apple"); got.Requests != 4 || got.Applied != 1 {
			t.Fatalf("backend saw %+v; want 4 requests, 1 applied", got)
		}
	})
}

func TestStockGivesUpAfterTheAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		backend := retrytest.NewBackend(retrytest.Reply{Status: http.StatusBadGateway})
		var rec retrytest.Recorder
		c := inventory.New("http://inventory.test", backend, retry.Policy{MaxAttempts: 4, Observer: &rec})

		_, err := c.Stock(t.Context(), "apple")

		if err == nil || errors.Is(err, inventory.ErrRejected) {
			t.Fatalf("Stock error %v; want the last 502", err)
		}
		if rec.Attempts() != 4 || rec.Reason() != retry.ReasonAttempts || backend.Total().Requests != 4 {
			t.Fatalf("recorded %s; backend %+v", &rec, backend.Total())
		}
	})
}

func TestReserveNotRetriedWhenRejected(t *testing.T) {
	backend := retrytest.NewBackend(retrytest.Reply{Status: http.StatusBadRequest})
	var rec retrytest.Recorder
	c := inventory.New("http://inventory.test", backend, retrytest.NoWaits(retry.Policy{Observer: &rec}))

	err := c.Reserve(t.Context(), "apple", -1)

	if !errors.Is(err, inventory.ErrRejected) || rec.Attempts() != 1 || backend.Total().Requests != 1 {
		t.Fatalf("Reserve = %v after %d attempts; want ErrRejected after 1", err, rec.Attempts())
	}
}

// After a lost reply the reservation is sent again with the same key: the
// backend applied both, which is why the service must honour the key.
func TestReserveResentWithItsKeyAfterALostReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		backend := retrytest.NewBackend(retrytest.Reply{Lost: true}, retrytest.Reply{Status: http.StatusCreated})
		c := inventory.New("http://inventory.test", backend, retry.Policy{})

		if err := c.Reserve(t.Context(), "apple", 2); err != nil {
			t.Fatal(err)
		}

		reqs := backend.Requests()
		if len(reqs) != 2 || reqs[0].Header.Get("Idempotency-Key") == "" ||
			reqs[0].Header.Get("Idempotency-Key") != reqs[1].Header.Get("Idempotency-Key") ||
			string(reqs[1].Body) != "apple 2" {
			t.Fatalf("requests %+v; want the same reservation and key twice", reqs)
		}
		if got := backend.Count(reqs[0].Key); got != (retrytest.Count{Requests: 2, Applied: 2}) {
			t.Fatalf("backend %+v", got)
		}
	})
}

// At a 30 % fault rate every Stock call still gets through.
func TestStockUnderChaos(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		chaos, err := retrytest.NewChaos(retrytest.ChaosConfig{Rate: 0.3, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		backend := retrytest.NewBackend(retrytest.Reply{Body: "3"})
		c := inventory.New("http://inventory.test", chaos.Transport(backend), retry.Policy{})
		for i := range 50 {
			if n, err := c.Stock(t.Context(), fmt.Sprint("sku", i)); err != nil || n != 3 {
				t.Fatalf("call %d: %d, %v", i, n, err)
			}
		}
		// A fault that fails the request is retried; one that only delays
		// it is not.
		if got := chaos.Count(); got.Faults == 0 || got.Requests <= 50 || got.Requests > 50+got.Faults ||
			backend.Total().Requests != got.Forwarded {
			t.Fatalf("chaos %+v, backend %+v", got, backend.Total())
		}
	})
}

// Over a real connection, a proxy loses the first reservation's reply
// after the server applied it.
func TestReserveThroughALostReplyProxy(t *testing.T) {
	backend := retrytest.NewBackend(retrytest.Reply{Status: http.StatusCreated})
	srv := httptest.NewServer(backend)
	t.Cleanup(srv.Close)
	var first atomic.Bool
	proxy, err := retrytest.NewProxy(retrytest.ProxyConfig{
		Target: srv.Listener.Addr().String(),
		Rule: func(retrytest.Message) retrytest.Action {
			if first.CompareAndSwap(false, true) {
				return retrytest.ResetReply
			}
			return retrytest.Forward
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	rt := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(rt.CloseIdleConnections)
	c := inventory.New("http://"+proxy.Addr(), rt, retrytest.NoWaits(retry.Policy{}))

	if err := c.Reserve(t.Context(), "pear", 1); err != nil {
		t.Fatal(err)
	}
	if proxy.Count().Lost() != 1 || backend.Total() != (retrytest.Count{Requests: 2, Applied: 2}) {
		t.Fatalf("proxy %+v, backend %+v; want 1 lost reply and 2 applications", proxy.Count(), backend.Total())
	}
}
