package faultserver_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/retrykit/retry/internal/faultserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start serves s on loopback with a connection counter; both are closed at cleanup.
func start(t *testing.T, s *faultserver.Server) (*httptest.Server, *faultserver.ConnCounter, *http.Client) {
	t.Helper()
	cc := &faultserver.ConnCounter{}
	ts := httptest.NewUnstartedServer(s)
	ts.Config.ConnState = cc.Hook
	ts.Start()
	tr := &http.Transport{}
	t.Cleanup(func() { tr.CloseIdleConnections(); ts.Close() })
	return ts, cc, &http.Client{Transport: tr}
}

func TestDecideIsDeterministic(t *testing.T) {
	cfg := faultserver.Config{Seed: 7, FaultRate: 0.3}
	a, b := faultserver.New(cfg), faultserver.New(cfg)
	other := faultserver.New(faultserver.Config{Seed: 8, FaultRate: 0.3})
	same, differ := true, false
	for i := range 1000 {
		id := "id:" + strconv.Itoa(i)
		for att := range 3 {
			if a.Decide(id, att) != b.Decide(id, att) {
				same = false
			}
			if a.Decide(id, att) != other.Decide(id, att) {
				differ = true
			}
		}
	}
	if !same {
		t.Error("two servers with the same Config decided differently")
	}
	if !differ {
		t.Error("another seed gave the same 3000 decisions")
	}
}

func TestFaultRate(t *testing.T) {
	for _, rate := range []float64{0, 0.1, 0.3, 0.9, 1, -1, 2} {
		s := faultserver.New(faultserver.Config{Seed: 1, FaultRate: rate})
		const n = 20000
		faults := 0
		kinds := map[faultserver.Fault]int{}
		for i := range n {
			f := s.Decide("id:"+strconv.Itoa(i), 0)
			if f != faultserver.OK {
				faults++
				kinds[f]++
			}
		}
		want := min(max(rate, 0), 1)
		got := float64(faults) / n
		if got < want-0.015 || got > want+0.015 {
			t.Errorf("rate %v: fault fraction %.4f, want %.2f±0.015", rate, got, want)
		}
		if want > 0.2 && len(kinds) != len(faultserver.AllFaults()) {
			t.Errorf("rate %v: %d kinds of fault injected, want all %d: %v", rate, len(kinds), len(faultserver.AllFaults()), kinds)
		}
	}
}

func TestFaultMixIsWeighted(t *testing.T) {
	s := faultserver.New(faultserver.Config{FaultRate: 1, Faults: []faultserver.Fault{faultserver.Status503, faultserver.Status503, faultserver.Status503, faultserver.Reset}})
	n503 := 0
	for i := range 4000 {
		switch f := s.Decide(strconv.Itoa(i), 0); f {
		case faultserver.Status503:
			n503++
		case faultserver.Reset:
		default:
			t.Fatalf("fault %v not in the mix", f)
		}
	}
	if n503 < 2800 || n503 > 3200 {
		t.Errorf("503 chosen %d of 4000 times, want about 3000", n503)
	}
}

func TestEachFaultOnTheWire(t *testing.T) {
	date := func(t *testing.T, resp *http.Response) {
		v := resp.Header.Get("Retry-After")
		when, err := http.ParseTime(v)
		if err != nil {
			t.Fatalf("Retry-After %q is not an HTTP-date: %v", v, err)
		}
		// now+2.5s at one-second resolution: 1.5s..2.5s from now.
		if d := time.Until(when); d < 1400*time.Millisecond || d > 2600*time.Millisecond {
			t.Errorf("Retry-After %q is %v from now, want 1.5s..2.5s", v, d)
		}
	}
	tests := []struct {
		fault  faultserver.Fault
		status int // 0: transport error
		check  func(*testing.T, *http.Response)
	}{
		{faultserver.Status500, 500, nil},
		{faultserver.Status502, 502, nil},
		{faultserver.Status503, 503, nil},
		{faultserver.Status504, 504, nil},
		{faultserver.TooMany, 429, func(t *testing.T, r *http.Response) {
			if v, ok := r.Header["Retry-After"]; ok {
				t.Errorf("Retry-After %q on the plain 429", v)
			}
		}},
		{faultserver.TooManySeconds, 429, func(t *testing.T, r *http.Response) {
			if v := r.Header.Get("Retry-After"); v != "3" {
				t.Errorf("Retry-After %q, want 3", v)
			}
		}},
		{faultserver.TooManyDate, 429, date},
		{faultserver.Reset, 0, nil},
		{faultserver.ResetAfterEffect, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.fault.String(), func(t *testing.T) {
			s := faultserver.New(faultserver.Config{FaultRate: 1, Faults: []faultserver.Fault{tt.fault}, RetryAfter: 2500 * time.Millisecond})
			ts, _, c := start(t, s)
			resp, err := c.Post(ts.URL+"/x", "text/plain", strings.NewReader("body"))
			if tt.status == 0 {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("got %s, want a connection reset", resp.Status)
				}
				if !strings.Contains(err.Error(), "reset") && !errors.Is(err, io.EOF) {
					t.Errorf("error %v, want a reset", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tt.status {
					t.Errorf("status %d, want %d", resp.StatusCode, tt.status)
				}
				if tt.check != nil {
					tt.check(t, resp)
				}
			}
			reqs := s.Requests()
			if len(reqs) != 1 || reqs[0].Fault != tt.fault {
				t.Fatalf("recorded %+v, want one request with fault %v", reqs, tt.fault)
			}
			effects := s.Stats().SideEffects
			if want := map[bool]int{true: 1, false: 0}[tt.fault == faultserver.ResetAfterEffect]; effects != want {
				t.Errorf("%d side effects, want %d", effects, want)
			}
		})
	}
}

func TestRetryAfterZero(t *testing.T) {
	s := faultserver.New(faultserver.Config{FaultRate: 1, Faults: []faultserver.Fault{faultserver.TooManySeconds}})
	ts, _, c := start(t, s)
	resp, err := c.Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v := resp.Header.Get("Retry-After"); v != "0" {
		t.Errorf("Retry-After %q, want 0", v)
	}
}

func TestStallEndsWhenTheClientGivesUp(t *testing.T) {
	s := faultserver.New(faultserver.Config{FaultRate: 1, Faults: []faultserver.Fault{faultserver.Stall}, Stall: time.Minute})
	ts, _, c := start(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL, nil)
	begin := time.Now()
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got %s, want a timeout", resp.Status)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want deadline exceeded", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	// ts.Close at cleanup waits for the handler: it must have returned.
}

func TestStallIsBounded(t *testing.T) {
	s := faultserver.New(faultserver.Config{FaultRate: 1, Faults: []faultserver.Fault{faultserver.Stall}, Stall: 20 * time.Millisecond})
	ts, _, c := start(t, s)
	begin := time.Now()
	resp, err := c.Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if d := time.Since(begin); resp.StatusCode != 503 || d < 20*time.Millisecond {
		t.Errorf("status %d after %v, want 503 after at least 20ms", resp.StatusCode, d)
	}
}

func TestRecordsAndEchoesBodyHash(t *testing.T) {
	s := faultserver.New(faultserver.Config{AttemptHeader: "X-Attempt"})
	ts, _, c := start(t, s)
	body := strings.Repeat("payload ", 1000)
	sum := sha256.Sum256([]byte(body))
	req, _ := http.NewRequest("PUT", ts.URL+"/a/b?q=1", strings.NewReader(body))
	req.Header.Set("Idempotency-Key", "k1")
	req.Header.Set(faultserver.RequestIDHeader, "r1")
	req.Header.Set("X-Attempt", "2")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := hex.EncodeToString(sum[:]); strings.TrimSpace(string(got)) != want || resp.Header.Get(faultserver.BodyHashHeader) != want {
		t.Errorf("response %q / header %q, want the body hash %s", got, resp.Header.Get(faultserver.BodyHashHeader), want)
	}
	r := s.Requests()[0]
	if r.Method != "PUT" || r.Path != "/a/b" || r.Key != "k1" || r.ID != "r1" || r.AttemptHeader != "2" ||
		r.BodySHA256 != sum || r.BodyLen != int64(len(body)) || r.Fault != faultserver.OK || r.Attempt != 0 || r.Seq != 0 {
		t.Errorf("recorded %+v", r)
	}
}

func TestIdempotencyKey(t *testing.T) {
	s := faultserver.New(faultserver.Config{})
	ts, _, c := start(t, s)
	post := func(key, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", ts.URL+"/orders", strings.NewReader(body))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if r := post("k", "a"); r.StatusCode != 200 || r.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("first POST: %d replayed=%q", r.StatusCode, r.Header.Get("Idempotent-Replayed"))
	}
	if r := post("k", "a"); r.StatusCode != 200 || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("second POST: %d replayed=%q, want a replay", r.StatusCode, r.Header.Get("Idempotent-Replayed"))
	}
	if r := post("k", "b"); r.StatusCode != 422 {
		t.Errorf("POST with the key and another body: %d, want 422", r.StatusCode)
	}
	post("", "a")
	post("", "a")
	eff := s.SideEffects()
	if eff["key:k"] != 1 || eff["url:POST /orders"] != 2 {
		t.Errorf("side effects %v, want key:k=1 and the keyless POST twice", eff)
	}
	st := s.Stats()
	if st.Requests != 5 || st.Replays != 1 || st.Conflicts != 1 || st.SideEffects != 3 {
		t.Errorf("stats %v", st)
	}
	if rs := s.Requests(); rs[1].Attempt != 1 || rs[2].Attempt != 2 || rs[3].Attempt != 0 || rs[4].Attempt != 1 {
		t.Errorf("attempt numbers %d %d %d %d", rs[1].Attempt, rs[2].Attempt, rs[3].Attempt, rs[4].Attempt)
	}
}

func TestResetAfterEffectWithKeyReplays(t *testing.T) {
	// Find an identity whose first attempt resets after the effect and
	// whose second succeeds, then check that the retry is a replay.
	cfg := faultserver.Config{Seed: 3, FaultRate: 0.5, Faults: []faultserver.Fault{faultserver.ResetAfterEffect}}
	s := faultserver.New(cfg)
	key := ""
	for i := 0; key == ""; i++ {
		k := "k" + strconv.Itoa(i)
		if s.Decide("key:"+k, 0) == faultserver.ResetAfterEffect && s.Decide("key:"+k, 1) == faultserver.OK {
			key = k
		}
	}
	ts, _, c := start(t, s)
	for i := range 2 {
		req, _ := http.NewRequest("POST", ts.URL, strings.NewReader("x"))
		req.Header.Set("Idempotency-Key", key)
		resp, err := c.Do(req)
		if i == 0 && err == nil {
			resp.Body.Close()
			t.Fatal("first attempt answered, want a reset")
		}
		if i == 1 {
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.Header.Get("Idempotent-Replayed") != "true" {
				t.Error("retry after the lost response was not a replay")
			}
		}
	}
	if n := s.SideEffects()["key:"+key]; n != 1 {
		t.Errorf("%d side effects, want 1", n)
	}
}

func TestConnCounter(t *testing.T) {
	s := faultserver.New(faultserver.Config{})
	ts, cc, c := start(t, s)
	for range 5 {
		resp, err := c.Get(ts.URL)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if n := cc.Count(http.StateNew); n != 1 {
		t.Errorf("%d connections for 5 sequential requests, want 1 (reused)", n)
	}
	c.CloseIdleConnections()
	deadline := time.Now().Add(2 * time.Second)
	for cc.Open() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if cc.Open() != 0 {
		t.Errorf("%d connections still open after closing idle ones", cc.Open())
	}
}

func TestFaultString(t *testing.T) {
	if faultserver.OK.String() != "ok" || faultserver.Status503.String() != "503" || faultserver.Fault(200).String() != "fault(200)" {
		t.Error("Fault.String")
	}
}
