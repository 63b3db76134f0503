package retryhttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retrytest"
)

// chain starts C (always 503) and services B and A in front of it, each
// calling the next with a 4-attempt Transport; it returns A's URL and C's
// request counter.
func chain(t *testing.T, middleware bool) (string, *atomic.Int64) {
	var cCount atomic.Int64
	c := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cCount.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(c.Close)
	next := c.URL
	for range 2 { // B, then A
		base := &http.Transport{}
		t.Cleanup(base.CloseIdleConnections)
		hc := &http.Client{Transport: &retryhttp.Transport{Base: base, Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 4}}}
		target := next
		var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequestWithContext(r.Context(), "GET", target, nil)
			resp, err := hc.Do(req)
			if err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			w.WriteHeader(resp.StatusCode)
		})
		if middleware {
			h = retryhttp.Middleware(h)
		}
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		next = s.URL
	}
	return next, &cCount
}

func TestChainNoAmplification(t *testing.T) {
	for _, tc := range []struct {
		name       string
		middleware bool
		want       int64
	}{{"middleware", true, 4}, {"naive", false, 64}} {
		t.Run(tc.name, func(t *testing.T) {
			a, cCount := chain(t, tc.middleware)
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			hc := &http.Client{Transport: &retryhttp.Transport{Base: base, Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 4}}}
			for i := range 3 {
				before := cCount.Load()
				resp, err := hc.Get(a)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 503 {
					t.Fatalf("status %d", resp.StatusCode)
				}
				if got := cCount.Load() - before; got != tc.want {
					t.Fatalf("request %d: C received %d requests; want %d", i, got, tc.want)
				}
				if tc.middleware && (resp.Header.Get(retryhttp.HeaderExhausted) != "1" || retryhttp.Attempts(resp) != 1 || !retryhttp.Exhausted(resp)) {
					t.Fatalf("header %q attempts %d", resp.Header.Get(retryhttp.HeaderExhausted), retryhttp.Attempts(resp))
				}
			}
		})
	}
}

func TestMiddlewareLeavesSuccessAlone(t *testing.T) {
	srv := httptest.NewServer(retryhttp.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hi")
	})))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	resp, err := (&http.Client{Transport: base}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hi" || resp.Header.Get(retryhttp.HeaderExhausted) != "" {
		t.Fatalf("%q %v", b, resp.Header)
	}
}

// The reason an Observer sees when the Transport gives up on a response:
// one that a lower layer marked Retry-Exhausted is not retried and counts
// as an inner loop's error (ReasonExhausted, as retry.Do reports it), not
// as a permanent one; a last attempt's 503 whose Retry-After exceeds
// MaxServerWait ends on the attempt limit (ReasonAttempts), as any last
// 503 does.
func TestGiveUpReasonOfResponses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header func(h http.Header, attempt string)
		want   retry.Reason
		sends  int64
	}{
		{"exhausted below", func(h http.Header, _ string) { h.Set(retryhttp.HeaderExhausted, "1") }, retry.ReasonExhausted, 1},
		{"long Retry-After at the last attempt", func(h http.Header, attempt string) {
			if attempt == "3" {
				h.Set("Retry-After", "3600")
			}
		}, retry.ReasonAttempts, 3},
		{"long Retry-After before the last attempt", func(h http.Header, _ string) { h.Set("Retry-After", "3600") }, retry.ReasonPermanent, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sends atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sends.Add(1)
				tc.header(w.Header(), r.Header.Get(retryhttp.HeaderAttempt))
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			defer srv.Close()
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			var rec retrytest.Recorder
			p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3, Observer: &rec}
			resp, err := (&http.Client{Transport: &retryhttp.Transport{Base: base, Policy: p}}).Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || sends.Load() != tc.sends {
				t.Fatalf("status %d after %d sends, want 503 after %d", resp.StatusCode, sends.Load(), tc.sends)
			}
			if dones := rec.Of(retry.EventDone); len(dones) != 1 || dones[0].Reason != tc.want {
				t.Errorf("EventDone %+v, want one with reason %v", dones, tc.want)
			}
		})
	}
}

// Middleware's ResponseWriter keeps the capabilities of net/http's:
// io.ReaderFrom (sendfile) too.
func TestMiddlewareKeepsReaderFrom(t *testing.T) {
	var ok bool
	h := retryhttp.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, ok = w.(io.ReaderFrom)
		if rf, isRF := w.(io.ReaderFrom); isRF {
			rf.ReadFrom(strings.NewReader("hello"))
		} else {
			w.Write([]byte("hello"))
		}
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hello" || resp.StatusCode != 200 {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
	if !ok {
		t.Fatal("the ResponseWriter given to the handler lost io.ReaderFrom")
	}
}
