package bench

import (
	"bytes"
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	retryablehttp "github.com/hashicorp/go-retryablehttp"

	retry "github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

// httpAttempts is the attempt limit of the HTTP workloads: 3 attempts.
const httpAttempts = 3

// httpClients returns one client per library, each over its own
// http.Transport (so connection pools are not shared), configured with 3
// attempts, zero waits and no logging:
//   - nethttp: plain http.Client, no retries (the baseline).
//   - retrykit: retryhttp.Transport{Base, Policy{Initial: Immediate, MaxAttempts: 3}}.
//   - retryablehttp: Client{HTTPClient, RetryMax 2, RetryWaitMin/Max 0, Logger nil},
//     its default CheckRetry and Backoff; StandardClient() turns it into an http.Client.
//   - failsafe: failsafehttp.NewRoundTripper with NewRetryPolicyBuilder()
//     (its HTTP rules) and WithMaxAttempts(3); delay zero (its default).
func httpClients(b *testing.B) []struct {
	name string
	c    *http.Client
} {
	mk := func() *http.Transport {
		t := http.DefaultTransport.(*http.Transport).Clone()
		b.Cleanup(t.CloseIdleConnections)
		return t
	}
	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{Transport: mk()}
	rc.RetryMax, rc.RetryWaitMin, rc.RetryWaitMax, rc.Logger = httpAttempts-1, 0, 0, nil
	fs := failsafehttp.NewRoundTripper(mk(), failsafehttp.NewRetryPolicyBuilder().WithMaxAttempts(httpAttempts).Build())
	return []struct {
		name string
		c    *http.Client
	}{
		{"nethttp", &http.Client{Transport: mk()}},
		{"retrykit", &http.Client{Transport: &retryhttp.Transport{Base: mk(),
			Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: httpAttempts}}}},
		{"retryablehttp", rc.StandardClient()},
		{"failsafe", &http.Client{Transport: fs}},
	}
}

// BenchmarkHTTPGet: GET of a 1 KiB body over loopback that succeeds at once;
// the body is read whole and closed.
func BenchmarkHTTPGet(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 1024)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(payload)
	}))
	defer srv.Close()
	for _, lib := range httpClients(b) {
		b.Run("lib="+lib.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				getPayload(b, lib.c, srv.URL, payload)
			}
		})
	}
}

// getPayload GETs url with c, reads the body whole and closes it, and
// fails b unless the answer is 200 with payload's length.
func getPayload(b *testing.B, c *http.Client, url string, payload []byte) {
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || n != int64(len(payload)) {
		b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
	}
}

// BenchmarkHTTPPut8MiB: a PUT of an 8 MiB body (a *bytes.Reader, so
// http.NewRequest sets GetBody) answered 503, 503, then 200. The server
// hashes every body it receives and the benchmark fails unless each one is
// identical to what was sent and exactly 3 attempts reached the server per
// operation. Besides B/op it reports body-copies/op: bytes allocated in the
// process per operation divided by the body size (0 = no copy of the body).
// The plain client sends once (its 503 is the answer) and is the baseline.
func BenchmarkHTTPPut8MiB(b *testing.B) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 8<<20/16)
	want := sha256.Sum256(payload)
	var seen, bad atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		io.Copy(h, r.Body)
		if !bytes.Equal(h.Sum(nil), want[:]) {
			bad.Add(1)
		}
		if seen.Add(1)%httpAttempts != 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	for _, lib := range httpClients(b) {
		b.Run("lib="+lib.name, func(b *testing.B) {
			perOp := int64(httpAttempts)
			if lib.name == "nethttp" {
				perOp = 1
			}
			seen.Store(0)
			bad.Store(0)
			if lib.name == "nethttp" {
				seen.Store(httpAttempts - 1) // plain client: every request gets the 200
			}
			b.ReportAllocs()
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			ops := 0
			for b.Loop() {
				req, err := http.NewRequest(http.MethodPut, srv.URL, bytes.NewReader(payload))
				if err != nil {
					b.Fatal(err)
				}
				resp, err := lib.c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
				if lib.name == "nethttp" {
					seen.Add(httpAttempts - 1)
				}
				ops++
			}
			runtime.ReadMemStats(&ms1)
			if n := bad.Load(); n != 0 {
				b.Fatalf("server received %d bodies different from the one sent", n)
			}
			if lib.name != "nethttp" && seen.Load() != perOp*int64(ops) {
				b.Fatalf("server saw %d requests for %d operations, want %d each", seen.Load(), ops, perOp)
			}
			b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(ops)/float64(len(payload)), "body-copies/op")
		})
	}
}
