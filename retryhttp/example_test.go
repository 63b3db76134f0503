package retryhttp_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

func ExampleTransport() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	client := &http.Client{Transport: &retryhttp.Transport{
		Policy: retry.Policy{Initial: 10 * time.Millisecond, Jitter: retry.NoJitter(), MaxAttempts: 4},
	}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", retryhttp.Attempts(resp), "attempts")
	// Output: 200 after 3 attempts
}

func ExampleNewClient() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer srv.Close()

	client, err := retryhttp.NewClient(retry.Policy{Initial: retry.Immediate, MaxAttempts: 3})
	if err != nil {
		fmt.Println(err) // an invalid Policy
		return
	}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	// Giving up on a status returns the last response, not an error.
	fmt.Println(resp.StatusCode, retryhttp.Attempts(resp), retryhttp.Exhausted(resp))
	// Output: 502 3 true
}

func ExampleNewClient_invalid() {
	_, err := retryhttp.NewClient(retry.Policy{Multiplier: 0.5})
	fmt.Println(errors.Is(err, retry.ErrInvalidPolicy))
	fmt.Println(err)
	// Output:
	// true
	// retryhttp: retry: invalid policy: Multiplier 0.5 is below 1 (or not a number)
}

func ExampleTransport_Validate() {
	t := &retryhttp.Transport{Policy: retry.Policy{MaxAttempts: -2}}
	fmt.Println(t.Validate())
	fmt.Println((&retryhttp.Transport{}).Validate())
	// Output:
	// retryhttp: retry: invalid policy: MaxAttempts -2 is negative (use retry.Unlimited for no limit)
	// <nil>
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, v := range []string{"120", "Fri, 02 Jan 2026 03:05:05 GMT", "99999999999999999999", "soon"} {
		d, ok := retryhttp.ParseRetryAfter(v, now)
		fmt.Println(d, ok)
	}
	// Output:
	// 2m0s true
	// 1m0s true
	// 2562047h47m16.854775807s true
	// 0s false
}

func ExampleMiddleware() {
	// C always fails; B calls C with a retrying transport, behind Middleware.
	var cCalls atomic.Int32
	c := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cCalls.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer c.Close()
	toC := &http.Client{Transport: &retryhttp.Transport{Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 4}}}
	b := httptest.NewServer(retryhttp.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", c.URL, nil)
		resp, err := toC.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	})))
	defer b.Close()

	toB := &http.Client{Transport: &retryhttp.Transport{Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 4}}}
	resp, err := toB.Get(b.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get(retryhttp.HeaderExhausted), "C calls:", cCalls.Load())
	// Output: 503 1 C calls: 4
}

func ExampleExhausted() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	// Client.Timeout wraps the body; the marks are in the header.
	client := &http.Client{Timeout: time.Minute, Transport: &retryhttp.Transport{
		Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 3},
	}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, retryhttp.Attempts(resp), retryhttp.Exhausted(resp))
	fmt.Println(resp.Header.Get(retryhttp.HeaderAttempt), resp.Header.Get(retryhttp.HeaderExhausted))

	// A client that turns the response into an error value keeping only
	// status and header (as googleapi.Error does) still carries them.
	kept := &http.Response{StatusCode: resp.StatusCode, Header: resp.Header}
	fmt.Println(retryhttp.Attempts(kept), retryhttp.Exhausted(kept))
	// Output:
	// 503 3 true
	// 3 1
	// 3 true
}

// A GET whose first copy is stuck gets a hedge after 10 ms; the hedge's
// answer wins, and the stuck request is cancelled.
func ExampleTransport_hedge() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(retryhttp.HeaderAttempt) == "" {
			<-r.Context().Done() // the first copy hangs until it is cancelled
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	h, err := retry.NewHedger(retry.HedgeConfig{FixedDelay: 10 * time.Millisecond, MaxCopies: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	tr := &retryhttp.Transport{Hedge: h, Policy: retry.Policy{Budget: retry.GRPCBudget()}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "from attempt", retryhttp.Attempts(resp))
	// Output: 200 from attempt 2
}
