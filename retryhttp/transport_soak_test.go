package retryhttp_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/faultserver"
	"github.com/retrykit/retry/retryhttp"
)

// soakKind is one of the request shapes the soak mixes.
type soakKind uint8

const (
	soakGET       soakKind = iota
	soakPUT                // body with GetBody (bytes.Reader)
	soakPUTStream          // body without GetBody: buffered by the transport
	soakDELETE
	soakPOSTKey   // POST with Idempotency-Key
	soakPOSTNoKey // POST without key: must never take effect twice
	numSoakKinds
)

var soakKindNames = [...]string{"GET", "PUT", "PUT(no GetBody)", "DELETE", "POST+key", "POST"}

func (k soakKind) method() string {
	return [...]string{"GET", "PUT", "PUT", "DELETE", "POST", "POST"}[k]
}

func (k soakKind) idempotent() bool { return k != soakPOSTNoKey }

// soakBody is the deterministic body of request i: 0..32 KiB of
// pseudo-random bytes, nil for GET and DELETE.
func soakBody(i int, k soakKind) []byte {
	if k == soakGET || k == soakDELETE {
		return nil
	}
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], uint64(i))
	src := rand.NewChaCha8(seed)
	b := make([]byte, rand.New(src).IntN(32<<10+1))
	src.Read(b)
	return b
}

const soakMaxAttempts = 12

type soakResult struct {
	kind    soakKind
	ok      bool  // 200 with the right body hash
	status  int   // final status, 0 on a transport error
	err     error // final transport error
	elapsed time.Duration
}

// TestSoak pushes 10,000 requests of mixed methods from 200 concurrent
// clients through one Transport against a server that injects a fault into
// 30% of the attempts (5xx, 429 with and without Retry-After, resets before
// and after the side effect, stalls past the attempt timeout), and checks
// what the transport promises: idempotent requests succeed or fail clearly
// within their budget, no POST without a key takes effect twice, bodies
// arrive identical, nothing leaks.
func TestSoak(t *testing.T) {
	requests := 10000
	if testing.Short() {
		requests = 2000
	}
	soak(t, requests, false)
}

// TestSoakSeesDuplicates is the soak's control: with RetryNonIdempotent the
// transport resends POSTs without a key after faults that may follow the
// side effect, and the soak must count POSTs that took effect twice, or it
// could not see the duplicates TestSoak promises there are none of.
func TestSoakSeesDuplicates(t *testing.T) {
	if dup := soak(t, 2000, true); dup == 0 {
		t.Fatal("with RetryNonIdempotent, no POST without key took effect twice: the soak cannot see duplicates")
	} else {
		t.Logf("with RetryNonIdempotent: %d POSTs without key took effect more than once", dup)
	}
}

// soak runs the soak with requests requests and returns how many POSTs
// without a key took effect more than once. With retryNonIdempotent (the
// control) such POSTs are retried and their duplicates are counted, not
// reported as errors.
func soak(t *testing.T, requests int, retryNonIdempotent bool) (duplicated int) {
	const clients = 200
	const budget = 15 * time.Second // per request
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	fs := faultserver.New(faultserver.Config{Seed: 20261202, FaultRate: 0.3, Stall: 5 * time.Second, AttemptHeader: retryhttp.HeaderAttempt})
	conns := &faultserver.ConnCounter{}
	ts := httptest.NewUnstartedServer(fs)
	ts.Config.ConnState = conns.Hook
	ts.Start()
	defer ts.Close()

	base := &http.Transport{MaxIdleConnsPerHost: clients, MaxIdleConns: clients}
	var retries, timeouts atomic.Int64
	tr := &retryhttp.Transport{
		Base: base,
		Policy: retry.Policy{
			Initial:        time.Millisecond,
			MaxDelay:       20 * time.Millisecond,
			Jitter:         retry.FullJitter(),
			MaxAttempts:    soakMaxAttempts,
			AttemptTimeout: time.Second,
			MaxElapsed:     budget - time.Second,
			Observer: retry.ObserverFunc(func(_ context.Context, ev retry.Event) {
				if ev.Kind != retry.EventRetry {
					return
				}
				retries.Add(1)
				var to interface{ Timeout() bool }
				if errors.As(ev.Err, &to) && to.Timeout() {
					timeouts.Add(1)
				}
			}),
		},
		MaxServerWait:      50 * time.Millisecond,
		MaxBufferedBody:    64 << 10,
		RetryNonIdempotent: retryNonIdempotent,
	}
	client := &http.Client{Transport: tr}

	bodySum := make([][32]byte, requests)
	results := make([]soakResult, requests)
	jobs := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				results[i] = soakOne(client, ts.URL, i, budget, &bodySum[i])
			}
		}()
	}
	for i := range requests {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	took := time.Since(start)

	// Connections: once idle ones are closed, every connection the server
	// accepted must be closed or hijacked (reset); one still open was
	// leaked by an unclosed response body.
	base.CloseIdleConnections()
	deadline := time.Now().Add(3 * time.Second)
	for conns.Open() != 0 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	if n := conns.Open(); n != 0 {
		t.Errorf("%d connections still open after CloseIdleConnections: a response body was not closed", n)
	}

	// Outcomes seen by the clients.
	var okBy, failBy [numSoakKinds]int
	var slowest time.Duration
	for i, r := range results {
		slowest = max(slowest, r.elapsed)
		if r.elapsed > budget+time.Second {
			t.Errorf("request %d (%s) took %v, over its %v budget", i, soakKindNames[r.kind], r.elapsed, budget)
		}
		if r.ok {
			okBy[r.kind]++
			continue
		}
		failBy[r.kind]++
		if failBy[r.kind] <= 3 {
			t.Logf("soak: request %d (%s) failed: status %d, error %v", i, soakKindNames[r.kind], r.status, r.err)
		}
		if r.kind.idempotent() {
			// A clear failure: the transport's give-up error, or the last
			// retryable response returned as is.
			var re *retry.Error
			switch {
			case r.err != nil && !errors.As(r.err, &re):
				t.Errorf("request %d (%s) failed without a *retry.Error: %v", i, soakKindNames[r.kind], r.err)
			case r.err == nil && r.status != 429 && r.status < 500:
				t.Errorf("request %d (%s) ended with status %d", i, soakKindNames[r.kind], r.status)
			}
		}
	}
	idemOK, idemAll := 0, 0
	for k := range numSoakKinds {
		if k.idempotent() {
			idemOK += okBy[k]
			idemAll += okBy[k] + failBy[k]
		}
	}
	// 12 attempts at 30% faults: all failing has probability 5e-7, so
	// failures come only from attempt timeouts on an overloaded machine.
	// Below 99% the soak proves nothing.
	if idemOK*100 < idemAll*99 {
		t.Errorf("only %d of %d idempotent requests succeeded", idemOK, idemAll)
	}

	// What the server saw.
	seen := fs.Requests()
	var gap time.Duration // longest time the server received nothing
	for j := 1; j < len(seen); j++ {
		gap = max(gap, seen[j].At.Sub(seen[j-1].At))
	}
	byID := map[string][]faultserver.Request{}
	for _, r := range seen {
		byID[r.ID] = append(byID[r.ID], r)
		i, err := strconv.Atoi(r.ID)
		if err != nil || i < 0 || i >= requests {
			t.Fatalf("server saw a request with id %q", r.ID)
		}
		if r.BodyErr == "" && r.BodySHA256 != bodySum[i] {
			t.Errorf("request %d (%s) attempt %d: server got a body of %d bytes with another hash than the client sent", i, r.Method, r.Attempt, r.BodyLen)
		}
	}
	refused := func(f faultserver.Fault) bool {
		return f == faultserver.TooMany || f == faultserver.TooManySeconds || f == faultserver.TooManyDate
	}
	effects := fs.SideEffects()
	neverSent := 0
	for i, r := range results {
		id := strconv.Itoa(i)
		got := byID[id]
		if len(got) == 0 {
			if r.ok {
				t.Errorf("request %d (%s) succeeded but never reached the server", i, soakKindNames[r.kind])
			}
			neverSent++
			continue
		}
		// The attempt header: absent on the first attempt, then 2, 3, …
		// (arrival order need not follow it: an attempt that timed out
		// on the client may still reach the server after its successor).
		for _, g := range got {
			if g.AttemptHeader == "" {
				continue
			}
			if n, err := strconv.Atoi(g.AttemptHeader); err != nil || n < 2 || n > soakMaxAttempts {
				t.Errorf("request %d: %s %q", i, retryhttp.HeaderAttempt, g.AttemptHeader)
			}
		}
		switch r.kind {
		case soakPOSTNoKey:
			if n := effects["id:"+id]; n > 1 {
				duplicated++
			}
			if retryNonIdempotent {
				continue // the control: resent after any fault
			}
			// Sent again only after a 429 (refused unprocessed).
			for _, g := range got[:len(got)-1] {
				if !refused(g.Fault) {
					t.Errorf("POST %d without key was sent again after %v: %d arrivals", i, g.Fault, len(got))
				}
			}
			if n := effects["id:"+id]; n > 1 || (r.ok && n != 1) {
				t.Errorf("POST %d without key took effect %d times (client ok=%v)", i, n, r.ok)
			}
		case soakPOSTKey:
			if n := effects["key:k-"+id]; n > 1 || (r.ok && n != 1) {
				t.Errorf("POST %d with key took effect %d times (client ok=%v)", i, n, r.ok)
			}
		}
	}

	st := fs.Stats()
	if st.Conflicts != 0 {
		t.Errorf("%d Idempotency-Key conflicts: a retry changed its body", st.Conflicts)
	}
	ok := 0
	for _, n := range okBy {
		ok += n
	}
	t.Logf("soak: %d requests from %d clients in %v (slowest %v); %d attempts reached the server, %d retries by the transport, %d connections",
		requests, clients, took.Round(time.Millisecond), slowest.Round(time.Millisecond), st.Requests, retries.Load(), conns.Count(http.StateNew))
	t.Logf("soak: longest pause between two arrivals at the server: %v", gap.Round(time.Millisecond))
	t.Logf("soak: %d retries followed an attempt timeout; %d requests (POST without key) ended before reaching the server", timeouts.Load(), neverSent)
	t.Logf("soak: server injected %d faults (%.1f%% of attempts): %v", st.Faults, 100*float64(st.Faults)/float64(st.Requests), st)
	for k := range numSoakKinds {
		t.Logf("soak: %-15s %5d ok, %4d failed", soakKindNames[k], okBy[k], failBy[k])
	}
	t.Logf("soak: %d of %d succeeded (idempotent: %d of %d); failed POSTs without key met a fault and were, by design, not retried", ok, requests, idemOK, idemAll)
	return duplicated
}

// soakOne sends request i and reports how it ended.
func soakOne(c *http.Client, url string, i int, budget time.Duration, sum *[32]byte) soakResult {
	k := soakKind(i % int(numSoakKinds))
	body := soakBody(i, k)
	*sum = sha256.Sum256(body)
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	var rd io.Reader
	switch {
	case body == nil:
	case k == soakPUTStream:
		rd = struct{ io.Reader }{bytes.NewReader(body)} // hides the type: no GetBody
	default:
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, k.method(), fmt.Sprintf("%s/soak/%d", url, i), rd)
	if err != nil {
		panic(err)
	}
	if k == soakPUTStream {
		req.ContentLength = int64(len(body))
	}
	req.Header.Set(faultserver.RequestIDHeader, strconv.Itoa(i))
	if k == soakPOSTKey {
		req.Header.Set("Idempotency-Key", "k-"+strconv.Itoa(i))
	}
	begin := time.Now()
	resp, err := c.Do(req)
	res := soakResult{kind: k, err: err}
	if err == nil {
		got, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		res.status = resp.StatusCode
		res.ok = rerr == nil && resp.StatusCode == 200 && string(got) == hex.EncodeToString(sum[:])+"\n"
		if rerr != nil {
			res.err = rerr
		}
	}
	res.elapsed = time.Since(begin)
	return res
}
