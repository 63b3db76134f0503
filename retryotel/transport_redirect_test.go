package retryotel_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/retrykit/retry/retryotel"
)

// hop is what the redirect server saw of one request.
type hop struct {
	path, attempt string
}

// redirectServer answers each path with the next status its script gives
// (a 3xx redirects to the path after the colon); paths it has no more
// statuses for answer 200.
func redirectServer(t *testing.T, script map[string][]string) (*httptest.Server, func() []hop) {
	t.Helper()
	var (
		mu   sync.Mutex
		seen []hop
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, hop{r.URL.Path, r.Header.Get("Retry-Attempt")})
		next := "200"
		if q := script[r.URL.Path]; len(q) > 0 {
			next, script[r.URL.Path] = q[0], q[1:]
		}
		mu.Unlock()
		switch {
		case next == "503":
			w.WriteHeader(http.StatusServiceUnavailable)
		case len(next) > 4 && next[:4] == "302:":
			http.Redirect(w, r, next[4:], http.StatusFound)
		default:
			io.WriteString(w, "ok")
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []hop {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// noRequest is a base whose responses have no Request, as a custom
// RoundTripper's may: the resend count must not depend on it.
type noRequest struct{ base http.RoundTripper }

func (n noRequest) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := n.base.RoundTrip(req)
	if resp != nil {
		resp.Request = nil
	}
	return resp, err
}

// TestTransportResendCountAcrossRedirects: http.request.resend_count counts
// every request sent before it for the same call, retries and redirects
// alike, as the HTTP semantic conventions define it ("for any reason,
// including redirects"). http.Client follows the redirects above the
// transport; each hop's request carries the redirect response that caused
// it, which carries how many attempts its hop made.
func TestTransportResendCountAcrossRedirects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script map[string][]string
		bare   bool // a base whose responses have no Request
		paths  []string
		counts []int64 // -1: absent
	}{
		{"retry then redirect", map[string][]string{"/a": {"503", "302:/b"}},
			false, []string{"/a", "/a", "/b"}, []int64{-1, 1, 2}},
		{"redirect alone", map[string][]string{"/a": {"302:/b"}},
			false, []string{"/a", "/b"}, []int64{-1, 1}},
		{"retries on both hops", map[string][]string{"/a": {"503", "302:/b"}, "/b": {"503", "503"}},
			false, []string{"/a", "/a", "/b", "/b", "/b"}, []int64{-1, 1, 2, 3, 4}},
		{"three hops, base without Request", map[string][]string{"/a": {"503", "302:/b"}, "/b": {"302:/c"}, "/c": {"503"}},
			true, []string{"/a", "/a", "/b", "/c", "/c"}, []int64{-1, 1, 2, 3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, seen := redirectServer(t, tc.script)
			mp, _ := newMeter(t)
			tp, sr := newTracer(t)
			var base http.RoundTripper = loopback(t)
			if tc.bare {
				base = noRequest{base}
			}
			client := &http.Client{Transport: otelTransport(base, fastHTTP(4), retryotel.WithMeterProvider(mp), retryotel.WithTracerProvider(tp))}
			resp, err := client.Get(srv.URL + "/a")
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			var paths []string
			for _, h := range seen() {
				paths = append(paths, h.path)
			}
			if !slices.Equal(paths, tc.paths) {
				t.Fatalf("server saw %v, want %v", paths, tc.paths)
			}
			var counts []int64
			for _, s := range startedClientSpans(sr) {
				n, ok := resendCount(s)
				if !ok {
					n = -1
				}
				counts = append(counts, n)
			}
			if !slices.Equal(counts, tc.counts) {
				t.Errorf("http.request.resend_count per span %v (-1: absent), want %v", counts, tc.counts)
			}
		})
	}
}
