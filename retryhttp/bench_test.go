package retryhttp_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

// BenchmarkGet1KiB compares a 1 KiB GET over loopback through a plain
// http.Transport with the same through a Transport on top of it.
func BenchmarkGet1KiB(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 1024)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(payload) }))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	run := func(b *testing.B, rt http.RoundTripper) {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		b.ReportAllocs()
		for b.Loop() {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	b.Run("plain", func(b *testing.B) { run(b, base) })
	b.Run("retryhttp", func(b *testing.B) { run(b, &retryhttp.Transport{Base: base}) })
}

// BenchmarkPut8MiB503x2 sends an 8 MiB PUT with GetBody that gets 503, 503,
// 200. The body is replayed through GetBody, never copied.
func BenchmarkPut8MiB503x2(b *testing.B) {
	body := bytes.Repeat([]byte("y"), 8<<20)
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if n.Add(1)%3 != 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr := &retryhttp.Transport{Base: base, Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		req, _ := http.NewRequest("PUT", srv.URL, bytes.NewReader(body))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

type okRT struct{ resp http.Response }

func (r *okRT) RoundTrip(*http.Request) (*http.Response, error) { return &r.resp, nil }

// BenchmarkOverhead measures what the Transport itself adds on a success
// at the first attempt, over an in-memory RoundTripper: "base" is the
// RoundTripper alone, "retryhttp" the zero-Policy Transport over it,
// "paced" the same with a Pacer (a response without pacing fields).
func BenchmarkOverhead(b *testing.B) {
	rt := &okRT{resp: http.Response{StatusCode: 200, Body: http.NoBody}}
	req, _ := http.NewRequest("GET", "http://127.0.0.1/", nil)
	run := func(b *testing.B, t http.RoundTripper) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := t.RoundTrip(req); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("base", func(b *testing.B) { run(b, rt) })
	b.Run("retryhttp", func(b *testing.B) { run(b, &retryhttp.Transport{Base: rt}) })
	b.Run("paced", func(b *testing.B) { run(b, &retryhttp.Transport{Base: rt, Pace: &retryhttp.Pacer{}}) })
}

// BenchmarkClientDo measures http.Client.Do on a success over an in-memory
// RoundTripper, with and without a Transport between them.
func BenchmarkClientDo(b *testing.B) {
	rt := &okRT{resp: http.Response{StatusCode: 200, Body: http.NoBody}}
	req, _ := http.NewRequest("GET", "http://127.0.0.1/", nil)
	run := func(b *testing.B, c *http.Client) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	b.Run("base", func(b *testing.B) { run(b, &http.Client{Transport: rt}) })
	b.Run("retryhttp", func(b *testing.B) { run(b, &http.Client{Transport: &retryhttp.Transport{Base: rt}}) })
}

// statusSeq answers each request in memory with the next status of its
// cycle: 503, 200 makes every call one retry.
type statusSeq struct {
	codes []int
	n     int
}

func (s *statusSeq) RoundTrip(*http.Request) (*http.Response, error) {
	code := s.codes[s.n%len(s.codes)]
	s.n++
	return &http.Response{StatusCode: code, Body: http.NoBody}, nil
}

// BenchmarkLoop measures the Transport's retry loop over an in-memory
// RoundTripper: "retry" is a 503 retried at once and then a 200;
// "attempt timeout" a success at the first attempt under an
// AttemptTimeout (the loop makes every attempt).
func BenchmarkLoop(b *testing.B) {
	req, _ := http.NewRequest("GET", "http://127.0.0.1/", nil)
	run := func(b *testing.B, t http.RoundTripper) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := t.RoundTrip(req)
			if err != nil || resp.StatusCode != 200 {
				b.Fatal(resp, err)
			}
		}
	}
	b.Run("retry", func(b *testing.B) {
		run(b, &retryhttp.Transport{Base: &statusSeq{codes: []int{503, 200}}, Policy: retry.Policy{Initial: retry.Immediate}})
	})
	b.Run("attempt timeout", func(b *testing.B) {
		run(b, &retryhttp.Transport{Base: &statusSeq{codes: []int{200}}, Policy: retry.Policy{AttemptTimeout: time.Minute}})
	})
}
