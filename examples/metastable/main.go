// Command metastable reproduces a metastable retry storm for real, over
// loopback, next to the simulator's prediction for the same parameters.
//
// Each policy gets a server of its own on 127.0.0.1: a FIFO queue in front
// of a fixed set of workers whose service takes a fixed time (4 workers of
// 40 ms: 100 requests/s, so that the machine's CPU is not what limits
// it). An open-loop generator sends 50 calls/s through retryhttp.Transport
// (5 attempts, immediate resends, a 1 s attempt timeout); the server
// serves a request whose client has gone anyway (wasted work). After 3 s
// the workers stop for 3 s. The three policies run at once for 24 s:
//
//	plain     immediate resends: stuck after the trigger
//	budget    the same with a retry.Budget (ratio 0.1)
//	throttle  the same with a retry.Throttle (K 2, 1 s window)
//
// It prints goodput (calls answered, per second) over time and the verdict
// per policy, real and simulated (sim.RunOpen), and exits with status 1
// unless plain stays stuck, budget and throttle recover, and every real
// verdict matches the simulator's. A run is recovered when, from some
// second after the trigger with at least 5 s left, every 3 s window has
// goodput of at least 90 % of its arrivals (shorter windows than sim's
// own criterion, to fit the run in under 60 s).
//
//	go run ./examples/metastable
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/sim"
)

// The experiment's parameters.
const (
	rate        = 50 // calls per second
	workers     = 4
	service     = 40 * time.Millisecond // per request and worker: 100 requests/s in all
	timeout     = time.Second           // attempt timeout
	attempts    = 5
	triggerAt   = 3 * time.Second
	triggerFor  = 3 * time.Second
	duration    = 24 * time.Second
	window      = 3  // seconds per recovery window
	tail        = 5  // seconds of run left after the recovery point, at least
	share       = 90 // percent of arrivals the goodput of a window must reach
	budgetRatio = 0.1
	throttleK   = 2
	throttleWin = time.Second
)

// server is a FIFO queue in front of workers that each take service per
// request; from triggerAt for triggerFor they serve nothing.
type server struct {
	queue    chan chan struct{}
	quit     chan struct{}
	start    time.Time
	received atomic.Int64
}

func newServer(start time.Time) *server {
	s := &server{queue: make(chan chan struct{}, 1<<16), quit: make(chan struct{}), start: start}
	for range workers {
		go s.work()
	}
	return s
}

func (s *server) work() {
	next := time.Now()
	for {
		select {
		case done := <-s.queue:
			// Back to back, each request ends service after the previous
			// one; during the trigger nothing is served until it ends.
			now := time.Now()
			next = maxTime(next, now)
			if off := s.start.Add(triggerAt); !next.Before(off) && next.Before(off.Add(triggerFor)) {
				next = off.Add(triggerFor)
			}
			next = next.Add(service)
			select {
			case <-time.After(time.Until(next)):
			case <-s.quit:
				return
			}
			close(done) // served, whether its client still waits or not
		case <-s.quit:
			return
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// ServeHTTP queues the request and answers once a worker has served it;
// it ignores the client's going away, as a server that cannot see it does.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.received.Add(1)
	done := make(chan struct{})
	select {
	case s.queue <- done:
	case <-s.quit:
		return
	}
	select {
	case <-done:
		w.WriteHeader(http.StatusOK)
	case <-s.quit:
	}
}

// series counts, per second of the run, the calls that arrived and those
// answered (goodput).
type series struct {
	mu       sync.Mutex
	arrivals []int64
	goodput  []int64
}

func (s *series) add(at time.Duration, good bool) {
	k := int(at / time.Second)
	s.mu.Lock()
	defer s.mu.Unlock()
	if k >= len(s.arrivals) {
		return
	}
	if good {
		s.goodput[k]++
	} else {
		s.arrivals[k]++
	}
}

// recovered applies the example's recovery rule to per-second series.
func recovered(arrivals, goodput []int64) bool {
	n := len(arrivals)
	from := int((triggerAt + triggerFor) / time.Second)
	first := from
	for u := from; u+window <= n; u++ {
		var a, g int64
		for k := u; k < u+window; k++ {
			a += arrivals[k]
			g += goodput[k]
		}
		if g*100 < a*share {
			first = u + 1
		}
	}
	return first <= n-tail
}

type policy struct {
	name string
	real func() retry.Policy
	sim  func(*sim.OpenScenario)
}

func basePolicy() retry.Policy {
	return retry.Policy{Initial: retry.Immediate, MaxAttempts: attempts, AttemptTimeout: timeout}
}

var policies = []policy{
	{"plain", basePolicy, func(*sim.OpenScenario) {}},
	{"budget", func() retry.Policy {
		p := basePolicy()
		b, err := retry.NewBudget(retry.BudgetConfig{Ratio: budgetRatio})
		if err != nil {
			panic(err)
		}
		p.Budget = b
		return p
	}, func(s *sim.OpenScenario) { s.Budget = &retry.BudgetConfig{Ratio: budgetRatio} }},
	{"throttle", func() retry.Policy {
		p := basePolicy()
		t, err := retry.NewThrottle(retry.ThrottleConfig{K: throttleK, Window: throttleWin})
		if err != nil {
			panic(err)
		}
		p.Throttle = t
		return p
	}, func(s *sim.OpenScenario) { s.Throttle = &retry.ThrottleConfig{K: throttleK, Window: throttleWin} }},
}

// runReal runs policy p against a server of its own and returns its series.
func runReal(ctx context.Context, p policy, start time.Time) *series {
	srv := newServer(start)
	ts := httptest.NewServer(srv)
	base := &http.Transport{MaxIdleConnsPerHost: 4096, MaxIdleConns: 4096}
	client := &http.Client{Transport: &retryhttp.Transport{Base: base, Policy: p.real()}}
	n := int(duration / time.Second)
	s := &series{arrivals: make([]int64, n), goodput: make([]int64, n)}
	var calls sync.WaitGroup
	for i := 0; ; i++ {
		at := time.Duration(i) * time.Second / rate
		if at >= duration {
			break
		}
		time.Sleep(time.Until(start.Add(at)))
		s.add(at, false)
		calls.Add(1)
		go func() {
			defer calls.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL, nil)
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				s.add(time.Since(start), true)
			}
		}()
	}
	close(srv.quit) // the run is over: release every queued request
	calls.Wait()
	ts.Close()
	base.CloseIdleConnections()
	return s
}

// predict runs the simulator with the same parameters.
func predict(p policy) (arrivals, goodput []int64, err error) {
	s := sim.OpenScenario{
		Rate: rate, ServiceRate: float64(workers) * float64(time.Second) / float64(service), Timeout: timeout,
		TriggerAt: triggerAt, TriggerFor: triggerFor, Duration: duration,
		Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: attempts},
	}
	p.sim(&s)
	r, err := sim.RunOpen(context.Background(), s)
	if err != nil {
		return nil, nil, err
	}
	for _, x := range r.Series {
		arrivals = append(arrivals, x.Arrivals)
		goodput = append(goodput, x.Goodput)
	}
	return arrivals, goodput, nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "metastable:", err)
		os.Exit(1)
	}
}

func run() error {
	type outcome struct {
		real            *series
		simA, simG      []int64
		realOK, predict bool
	}
	out := make([]outcome, len(policies))
	for i, p := range policies {
		a, g, err := predict(p)
		if err != nil {
			return err
		}
		out[i].simA, out[i].simG, out[i].predict = a, g, recovered(a, g)
	}
	ctx, cancel := context.WithTimeout(context.Background(), duration+20*time.Second)
	defer cancel()
	start := time.Now().Add(100 * time.Millisecond)
	var wg sync.WaitGroup
	for i, p := range policies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].real = runReal(ctx, p, start)
		}()
	}
	wg.Wait()
	fmt.Printf("%d calls/s, a server of %d/s (%d workers × %v), %v timeout, %d attempts, no capacity from %v for %v\n",
		rate, int(time.Second/service)*workers, workers, service, timeout, attempts, triggerAt, triggerFor)
	fmt.Print("goodput per second, real / simulated:\n   s")
	for _, p := range policies {
		fmt.Printf("  %15s", p.name)
	}
	fmt.Println()
	for k := range int(duration / time.Second) {
		fmt.Printf("%4d", k)
		for i := range policies {
			fmt.Printf("  %7d / %5d", out[i].real.goodput[k], out[i].simG[k])
		}
		fmt.Println()
	}
	var failed []string
	for i, p := range policies {
		o := &out[i]
		o.realOK = recovered(o.real.arrivals, o.real.goodput)
		verdict := func(ok bool) string {
			if ok {
				return "recovered"
			}
			return "stuck"
		}
		fmt.Printf("%-9s real: %-9s  simulated: %s\n", p.name, verdict(o.realOK), verdict(o.predict))
		want := p.name != "plain"
		if o.realOK != want || o.predict != want {
			failed = append(failed, fmt.Sprintf("%s: real %s, simulated %s, want %s", p.name, verdict(o.realOK), verdict(o.predict), verdict(want)))
		}
	}
	if failed != nil {
		return errors.New(fmt.Sprint(failed))
	}
	return nil
}
