package retryhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

func TestGiveUpReturnsLastResponse(t *testing.T) {
	s, srv := newScript(t, 500, 502, 504, 503)
	s.header = http.Header{"X-Last": {"yes"}}
	c := client(t, &retryhttp.Transport{Policy: fast})
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || string(body) != "status Service Unavailable" || resp.Header.Get("X-Last") != "yes" {
		t.Fatalf("got %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if s.n() != 4 || retryhttp.Attempts(resp) != 4 || !retryhttp.Exhausted(resp) {
		t.Fatalf("sends %d attempts %d exhausted %v", s.n(), retryhttp.Attempts(resp), retryhttp.Exhausted(resp))
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("%d connections; want 1", n)
	}
}

func TestContextCancelDuringWait(t *testing.T) {
	s, srv := newScript(t, 503)
	c := client(t, &retryhttp.Transport{Policy: retry.Policy{Initial: time.Hour, MaxDelay: time.Hour}})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for s.n() == 0 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(5 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	_, err := c.Do(req)
	wg.Wait()
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second || s.n() != 1 {
		t.Fatalf("err %v after %v, %d sends", err, time.Since(start), s.n())
	}
}

// Item 7: a request with a nil Header can be retried.
func TestNilHeaderRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		rt := &fakeRT{status: 503, retryAfter: func() string { return "0" }}
		tr := &retryhttp.Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			got = append(got, r.Header.Get(retryhttp.HeaderAttempt))
			return rt.RoundTrip(r)
		}), Policy: fast}
		u, _ := url.Parse("http://127.0.0.1/x")
		req := &http.Request{Method: "GET", URL: u} // Header nil
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.Join(got, ",") != ",2" || req.Header != nil {
			t.Fatalf("status %d, attempt headers %q, caller's header %v", resp.StatusCode, got, req.Header)
		}
	})
}
