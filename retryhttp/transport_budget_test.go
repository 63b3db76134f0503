package retryhttp_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

// TestBudgetBurst sends 1,000 requests from 8 goroutines to a service that
// always fails, through one Transport with 4 attempts and a shared Budget:
// the service's load stays within the budget's ratio plus its floor of the
// 1,000 requests it would see with no retries (4,000 without the budget).
func TestBudgetBurst(t *testing.T) {
	var cCount atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cCount.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	const ratio, floor, window = 0.1, 1.0, 10 * time.Second
	budget, err := retry.NewBudget(retry.BudgetConfig{Ratio: ratio, MinPerSecond: floor, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	hc := &http.Client{Transport: &retryhttp.Transport{Base: base,
		Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 4, Budget: budget}}}

	const requests, workers = 1000, 8
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= requests {
				resp, err := hc.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 503 {
					t.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	got := cCount.Load()
	// Budget's documented bound over a span T: retries <= ratio × first
	// attempts + floor × (T + 2 × window).
	limit := int64(requests + ratio*requests + floor*(elapsed+2*window).Seconds())
	t.Logf("C received %d requests for %d client requests in %v (limit %d; no budget: %d)", got, requests, elapsed, limit, 4*requests)
	if got > limit {
		t.Fatalf("C received %d requests; budget allows at most %d", got, limit)
	}
	if got <= requests {
		t.Fatalf("C received %d requests: the budget allowed no retry at all", got)
	}
}

// TestBudgetRefusalGivesUp checks that a refused retry ends RoundTrip with
// the server's last response (a status) or with an error matching
// retry.ErrBudgetRefused (a transport error).
func TestBudgetRefusalGivesUp(t *testing.T) {
	budget, err := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	s, srv := newScript(t, 503, 200)
	c := client(t, &retryhttp.Transport{Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 4, Budget: budget}})
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s.n() != 1 || resp.StatusCode != 503 || !retryhttp.Exhausted(resp) {
		t.Fatalf("%d sends, status %d, exhausted %v", s.n(), resp.StatusCode, retryhttp.Exhausted(resp))
	}
	// Transport error: a refused connection.
	c2 := client(t, &retryhttp.Transport{Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 4, Budget: budget}})
	srv.Close()
	_, err = c2.Get(srv.URL)
	if !errors.Is(err, retry.ErrBudgetRefused) {
		t.Fatalf("err %v", err)
	}
}
