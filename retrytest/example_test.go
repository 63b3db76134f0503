package retrytest_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retrytest"
)

// A scripted backend answers a call 503, then 429 with Retry-After, then
// 200. In a test, run this inside synctest.Test and the 20 s of waits
// take no time; here the policy has no computed waits and the server's
// wait is 0.
func ExampleBackend() {
	b := retrytest.NewBackend(
		retrytest.Reply{Status: http.StatusServiceUnavailable},
		retrytest.Reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"0"}}},
		retrytest.Reply{Body: "done"},
	)
	client := &http.Client{Transport: &retryhttp.Transport{Base: b, Policy: retrytest.NoWaits(retry.Policy{})}}
	resp, err := client.Get("http://orders.test/42")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	fmt.Printf("%+v\n", b.Count("GET http://orders.test/42"))
	// Output:
	// 200 OK
	// {Requests:3 Applied:1}
}

// A lost reply: the server applies the POST, the client sees a reset.
// Without an Idempotency-Key the transport does not send it again: one
// request, applied once, and an error for the caller.
func ExampleReply_lost() {
	b := retrytest.NewBackend(retrytest.Reply{Lost: true})
	client := &http.Client{Transport: &retryhttp.Transport{Base: b, Policy: retrytest.NoWaits(retry.Policy{})}}
	_, err := client.Post("http://orders.test/", "text/plain", nil)
	fmt.Println(errors.Is(err, syscall.ECONNRESET))
	fmt.Printf("%+v\n", b.Total())
	// Output:
	// true
	// {Requests:1 Applied:1}
}

// A Recorder reads a call's events in one line.
func ExampleRecorder() {
	var rec retrytest.Recorder
	p := retry.Policy{Initial: time.Millisecond, Jitter: retry.NoJitter(), MaxAttempts: 3, Observer: &rec}
	retry.Do(context.Background(), p, func(context.Context) error { return errors.New("down") })
	fmt.Println(rec.Attempts(), rec.Waits(), rec.Reason())
	fmt.Println(rec.Last())
	// Output:
	// 3 [1ms 2ms] attempts used up
	// attempt 1, retry 1 wait 1ms, attempt 2, retry 2 wait 2ms, attempt 3, done 3 (attempts used up)
}

// Under Seed, the jittered waits of the zero Policy are the same in every
// run: those Schedule returns.
func ExampleSchedule() {
	p := retry.Policy{MaxAttempts: 4}
	waits, err := retrytest.Schedule(p, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(waits))
	for i, d := range waits {
		lo, hi := p.Bounds(i)
		fmt.Println(d >= lo && d <= hi)
	}
	// Output:
	// 3
	// true
	// true
	// true
}

// NoWaits keeps a policy's stop rules and drops its waits, for unit tests
// of what is retried.
func ExampleNoWaits() {
	var rec retrytest.Recorder
	p := retrytest.NoWaits(retry.Policy{MaxAttempts: 5, Observer: &rec})
	err := retry.Do(context.Background(), p, func(context.Context) error {
		return retry.Permanent(errors.New("bad request"))
	})
	fmt.Println(rec.Attempts(), rec.Reason(), err != nil)
	// Output:
	// 1 error not retryable true
}

// Chaos in front of a backend fails 30 % of requests with 503s, resets and
// lost replies; a retrying client gets every GET through, and the counts
// say what the backend did (a lost reply's GET was applied, then sent
// again).
func ExampleChaos() {
	chaos, err := retrytest.NewChaos(retrytest.ChaosConfig{Rate: 0.3, Seed: 1, Faults: []retrytest.Reply{
		{Status: http.StatusServiceUnavailable},
		{Err: syscall.ECONNRESET},
		{Lost: true},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	b := retrytest.NewBackend()
	client := &http.Client{Transport: &retryhttp.Transport{
		Base:   chaos.Transport(b),
		Policy: retrytest.NoWaits(retry.Policy{}),
	}}
	ok := 0
	for i := range 20 {
		resp, err := client.Get(fmt.Sprintf("http://svc.test/%d", i))
		if err == nil && resp.StatusCode == http.StatusOK {
			ok++
			resp.Body.Close()
		}
	}
	fmt.Println(ok, "of 20 calls succeeded")
	fmt.Printf("%+v\n", chaos.Count())
	fmt.Printf("%+v\n", b.Total())
	// Output:
	// 20 of 20 calls succeeded
	// {Requests:27 Faults:7 Forwarded:24 Lost:4}
	// {Requests:24 Applied:24}
}

// A Proxy in front of a real server loses the reply of the first request:
// the server applied it, the client saw its connection reset. Without a
// Protocol each chunk the client writes is a message, which fits HTTP/1.1.
func ExampleProxy() {
	b := retrytest.NewBackend()
	srv := httptest.NewServer(b)
	defer srv.Close()
	var once sync.Once
	p, err := retrytest.NewProxy(retrytest.ProxyConfig{
		Target: srv.Listener.Addr().String(),
		Rule: func(retrytest.Message) retrytest.Action {
			a := retrytest.Forward
			once.Do(func() { a = retrytest.ResetReply })
			return a
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	_, err = client.Post("http://"+p.Addr()+"/orders", "text/plain", strings.NewReader("42"))
	fmt.Println(errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF))
	fmt.Println(p.Count().Lost(), "lost reply;", b.Total().Applied, "applied")
	// Output:
	// true
	// 1 lost reply; 1 applied
}

// AtRate makes a Rule that resets a share of the replies, here every
// reply of the INCR commands of a RESP connection (Redis, Valkey).
func ExampleAtRate() {
	rule, err := retrytest.AtRate(1, retrytest.ResetReply, 1, func(m retrytest.Message) bool {
		return m.Name == "incr"
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rule(retrytest.Message{Name: "incr"}) == retrytest.ResetReply)
	fmt.Println(rule(retrytest.Message{Name: "get"}) == retrytest.Forward)
	// Output:
	// true
	// true
}

// CheckFramer tells whether a Framer splits a conversation of its
// protocol as the Proxy needs.
func ExampleCheckFramer() {
	err := retrytest.CheckFramer(retrytest.RESP,
		retrytest.Exchange{Message: []byte("*1\r\n$4\r\nPING\r\n"), Reply: []byte("+PONG\r\n")},
		retrytest.Exchange{Message: []byte("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"), Reply: []byte("$-1\r\n")},
	)
	fmt.Println(err)
	// Output:
	// <nil>
}

// Postgres frames PostgreSQL connections: a Rule sees each simple query
// named by its first word, and can lose a COMMIT's reply once the server
// answered it (Target is the server's loopback address).
func ExamplePostgres() {
	rule := func(m retrytest.Message) retrytest.Action {
		switch {
		case m.Name != "COMMIT":
			return retrytest.Forward
		case m.Reply == nil:
			return retrytest.AfterReply // ask again with the server's reply
		case bytes.Contains(m.Reply, []byte("COMMIT\x00")):
			return retrytest.ResetReply // committed: lose the reply
		}
		return retrytest.Forward // ROLLBACK: a failed transaction
	}
	_ = retrytest.ProxyConfig{Target: "127.0.0.1:5432", Protocol: retrytest.Postgres, Rule: rule}

	// What the Rule sees of a client's startup message and a COMMIT.
	client := bufio.NewReader(strings.NewReader("\x00\x00\x00\x09\x00\x03\x00\x00\x00" + "Q\x00\x00\x00\x0bCOMMIT\x00"))
	f := retrytest.Postgres()
	for range 2 {
		_, name, err := f.Next(client)
		fmt.Println(name, err)
	}
	// Output:
	// (startup) <nil>
	// COMMIT <nil>
}

// The same script behind a real connection, for tests of what the wire
// sees: here a 503, then the answer.
func ExampleBackend_handler() {
	b := retrytest.NewBackend(retrytest.Reply{Status: http.StatusServiceUnavailable}, retrytest.Reply{Body: "hello"})
	srv := httptest.NewServer(b)
	defer srv.Close()
	client := &http.Client{Transport: &retryhttp.Transport{Base: srv.Client().Transport, Policy: retrytest.NoWaits(retry.Policy{})}}
	resp, err := client.Get(srv.URL + "/greeting")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, string(body))
	fmt.Printf("%+v\n", b.Total())
	// Output:
	// 200 OK hello
	// {Requests:2 Applied:1}
}

// Script gives one call a script of its own.
func ExampleBackend_Script() {
	b := retrytest.NewBackend(retrytest.Reply{Body: "fine"})
	b.Script("GET http://svc.test/broken", retrytest.Reply{Status: http.StatusInternalServerError})
	client := &http.Client{Transport: &retryhttp.Transport{Base: b, Policy: retrytest.NoWaits(retry.Policy{MaxAttempts: 3})}}
	for _, path := range []string{"/ok", "/broken"} {
		resp, err := client.Get("http://svc.test" + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(path, resp.StatusCode, b.Count("GET http://svc.test"+path).Requests)
	}
	// Output:
	// /ok 200 1
	// /broken 500 3
}

// WithCall names the calls a test runs at once, so that the Recorder keeps
// their events apart.
func ExampleWithCall() {
	var rec retrytest.Recorder
	p := retrytest.NoWaits(retry.Policy{MaxAttempts: 4, Observer: &rec})
	var wg sync.WaitGroup
	for _, name := range []string{"flaky", "down"} {
		wg.Go(func() {
			n := 0
			retry.Do(retrytest.WithCall(context.Background(), name), p, func(context.Context) error {
				if n++; name == "flaky" && n == 2 {
					return nil
				}
				return errors.New("unavailable")
			})
		})
	}
	wg.Wait()
	fmt.Println(rec.Call("flaky").Attempts(), rec.Call("flaky").Reason() == 0)
	fmt.Println(rec.Call("down").Attempts(), rec.Call("down").Reason())
	// Output:
	// 2 true
	// 4 attempts used up
}

// Seed fixes the jitter of the calls made under its context.
func ExampleSeed() {
	var rec retrytest.Recorder
	p := retry.Policy{Initial: time.Millisecond, MaxAttempts: 3, Observer: &rec}
	ctx := retrytest.Seed(context.Background(), 42)
	retry.Do(ctx, p, func(context.Context) error { return errors.New("down") })
	want, _ := retrytest.Schedule(p, 42) // p is valid
	fmt.Println(slices.Equal(rec.Waits(), want))
	// Output:
	// true
}

// Middleware puts Chaos in front of a handler: here every request gets a
// 503.
func ExampleChaos_Middleware() {
	chaos, err := retrytest.NewChaos(retrytest.ChaosConfig{Rate: 1, Faults: []retrytest.Reply{{Status: http.StatusServiceUnavailable}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	b := retrytest.NewBackend()
	srv := httptest.NewServer(chaos.Middleware(b))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, b.Total().Requests, chaos.Count().Faults)
	// Output:
	// 503 0 1
}
