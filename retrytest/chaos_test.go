package retrytest_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

func TestNewChaosRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  retrytest.ChaosConfig
		want string
	}{
		{retrytest.ChaosConfig{Rate: -0.1}, "Rate -0.1"},
		{retrytest.ChaosConfig{Rate: 1.5}, "Rate 1.5"},
		{retrytest.ChaosConfig{Faults: []retrytest.Reply{}}, "Faults is empty"},
		{retrytest.ChaosConfig{Faults: []retrytest.Reply{{Status: 42}}}, "Faults[0].Status 42"},
		{retrytest.ChaosConfig{Faults: []retrytest.Reply{{}, {Latency: -time.Second}}}, "Faults[1].Latency -1s"},
	} {
		if _, err := retrytest.NewChaos(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "retrytest: ") {
			t.Errorf("NewChaos(%+v) = %v; want an error naming %q", tc.cfg, err, tc.want)
		}
	}
}

// sequence returns the statuses (or "err") of n sequential GETs through a
// Chaos transport over a backend that always answers 200.
func sequence(t *testing.T, cfg retrytest.ChaosConfig, n int) ([]string, *retrytest.Chaos, *retrytest.Backend) {
	t.Helper()
	c, err := retrytest.NewChaos(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := retrytest.NewBackend()
	rt := c.Transport(b)
	var out []string
	for i := range n {
		req := httptest.NewRequest(http.MethodGet, fmt.Sprintf("http://svc.test/%d", i), nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			out = append(out, "err")
			continue
		}
		resp.Body.Close()
		out = append(out, fmt.Sprint(resp.StatusCode))
	}
	return out, c, b
}

// TestChaosRate: the share of faults follows the rate, the same seed gives
// the same faults, another seed others; the counts add up.
func TestChaosRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, c, b := sequence(t, retrytest.ChaosConfig{Rate: 0.3, Seed: 1}, 1000)
		again, _, _ := sequence(t, retrytest.ChaosConfig{Rate: 0.3, Seed: 1}, 1000)
		other, _, _ := sequence(t, retrytest.ChaosConfig{Rate: 0.3, Seed: 2}, 1000)
		if strings.Join(a, ",") != strings.Join(again, ",") {
			t.Fatal("the same seed gave other faults")
		}
		if strings.Join(a, ",") == strings.Join(other, ",") {
			t.Fatal("seeds 1 and 2 gave the same faults")
		}
		n := c.Count()
		// 1000 draws at 0.3: 300 expected, standard deviation 14.5.
		if n.Requests != 1000 || n.Faults < 240 || n.Faults > 360 {
			t.Fatalf("count %+v; want about 300 faults in 1000", n)
		}
		if n.Forwarded != b.Total().Requests || n.Lost == 0 || b.Total().Applied != n.Forwarded {
			t.Fatalf("chaos %+v, backend %+v: every forwarded request reaches the backend", n, b.Total())
		}
		errs := 0
		for _, s := range a {
			if s == "err" {
				errs++
			}
		}
		// Errors are the resets before sending and the lost replies, about
		// 2/5 of the faults.
		if errs == 0 || errs >= n.Faults {
			t.Fatalf("%d errors among %d faults", errs, n.Faults)
		}
		if _, c, _ := sequence(t, retrytest.ChaosConfig{Seed: 1}, 100); c.Count().Faults != 0 {
			t.Fatalf("rate 0: %+v", c.Count())
		}
	})
}

// TestChaosTransportFaults: each kind of fault, one at a time, at rate 1.
func TestChaosTransportFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			fault   retrytest.Reply
			status  int
			err     error
			applied int
			took    time.Duration
		}{
			{retrytest.Reply{Status: 503}, 503, nil, 0, 0},
			{retrytest.Reply{Latency: time.Second}, 200, nil, 1, time.Second},
			{retrytest.Reply{Err: errDown}, 0, errDown, 0, 0},
			{retrytest.Reply{Lost: true, Latency: time.Minute}, 0, syscall.ECONNRESET, 1, time.Minute},
		} {
			c, err := retrytest.NewChaos(retrytest.ChaosConfig{Rate: 1, Faults: []retrytest.Reply{tc.fault}})
			if err != nil {
				t.Fatal(err)
			}
			b := retrytest.NewBackend()
			start := time.Now()
			resp, err := c.Transport(b).RoundTrip(httptest.NewRequest(http.MethodPut, "http://svc.test/", strings.NewReader("x")))
			status := 0
			if resp != nil {
				status = resp.StatusCode
				resp.Body.Close()
			}
			if status != tc.status || !errors.Is(err, tc.err) || b.Total().Applied != tc.applied || time.Since(start) != tc.took {
				t.Errorf("fault %+v: %d, %v, backend %+v, %v; want %d, %v, %d applied, %v",
					tc.fault, status, err, b.Total(), time.Since(start), tc.status, tc.err, tc.applied, tc.took)
			}
		}
	})
}

// TestChaosMiddleware: as server middleware over a real connection, a
// retrying client gets every call through at a fault rate of 0.5, and
// the backend sees each lost reply applied.
func TestChaosMiddleware(t *testing.T) {
	c, err := retrytest.NewChaos(retrytest.ChaosConfig{Rate: 0.5, Seed: 3, Faults: []retrytest.Reply{
		{Status: 503}, {Err: errDown}, {Lost: true}, {Latency: time.Millisecond},
	}})
	if err != nil {
		t.Fatal(err)
	}
	b := retrytest.NewBackend()
	srv := httptest.NewServer(c.Middleware(b))
	t.Cleanup(srv.Close)
	client := srv.Client()
	p := retry.Policy{Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxAttempts: 20}
	for i := range 20 {
		if s, err := get(t.Context(), t, client.Transport, p, fmt.Sprintf("%s/%d", srv.URL, i)); s != 200 || err != nil {
			t.Fatalf("call %d: %d, %v", i, s, err)
		}
	}
	n := c.Count()
	if n.Faults == 0 || n.Lost == 0 || n.Forwarded != b.Total().Requests || b.Total().Applied != n.Forwarded {
		t.Fatalf("chaos %+v, backend %+v", n, b.Total())
	}
	// Each GET was applied once, plus once per lost reply.
	if got, want := b.Total().Applied, 20+n.Lost; got != want {
		t.Fatalf("backend applied %d; want %d", got, want)
	}
}
