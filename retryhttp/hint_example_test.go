package retryhttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

// ParseHint reads the wait a response asks for, from the first valid hint
// in the order of precedence.
func ExampleParseHint() {
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	for _, h := range []http.Header{
		{"Retry-After-Ms": {"1500"}},
		{"Ratelimit-Policy": {`"default";q=10;w=60`}, "Ratelimit": {`"default";r=0;t=2`}},
		{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1796630403"}}, // Unix seconds
		{"X-Ratelimit-Remaining-Tokens": {"0"}, "X-Ratelimit-Reset-Tokens": {"6m0s"}},
		{"Retry-After": {"7"}, "Retry-After-Ms": {"6500"}},                    // Retry-After first
		{"X-Ratelimit-Remaining": {"3"}, "X-Ratelimit-Reset": {"1796630403"}}, // quota left: no hint
	} {
		hint, ok := retryhttp.ParseHint(h, now)
		fmt.Printf("%v %q %v\n", ok, hint, hint.Wait)
	}
	// Output:
	// true "retry-after-ms 1500" 1.5s
	// true "RateLimit t=2" 2s
	// true "X-RateLimit-Reset 1796630403" 3s
	// true "X-Ratelimit-Reset-Tokens 6m0s" 6m0s
	// true "Retry-After 7" 7s
	// false "" 0s
}

// WaitHint tells an Observer which server hint set a retry's wait.
func ExampleWaitHint() {
	n := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n++
		code, h := 200, http.Header{}
		if n == 1 {
			code, h = 429, http.Header{"Retry-After-Ms": {"20"}}
		}
		return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	tr := &retryhttp.Transport{Base: base, Policy: retry.Policy{
		Initial: time.Millisecond,
		Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			if h, ok := retryhttp.WaitHint(e); ok {
				fmt.Printf("attempt %d: waiting as %s asks\n", e.Attempt, h)
			}
		}),
	}}
	resp, err := (&http.Client{Transport: tr}).Get("http://127.0.0.1/")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// attempt 1: waiting as retry-after-ms 20 asks
	// 200
}

// A Pacer holds a request to a host whose quota a response said is spent,
// here until its deadline would pass: it is not sent.
func ExamplePacer() {
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		h := http.Header{"Ratelimit": {`"default";r=0;t=30`}} // a 200 that spends the quota
		return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	client := &http.Client{Transport: &retryhttp.Transport{Base: base, Pace: &retryhttp.Pacer{}}}
	resp, err := client.Get("http://127.0.0.1/")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1/", nil)
	_, err = client.Do(req)
	var he *retryhttp.HoldError
	fmt.Println(errors.Is(err, retry.ErrNotSent), errors.As(err, &he), he.Hint)
	// Output:
	// 200
	// true true RateLimit t=30
}
