// Package fleettest is the multi-process harness shared by the fleet
// tests of retryredis and retryvalkey: the test binary re-executes itself
// as worker processes, each with its own Budget/Throttle and store client,
// against a loopback backend started by the parent and one redis-server.
// Only tests import it; each module supplies a small Adapter (how to dial
// its client and share a Budget or Throttle) and calls WorkerMain from its
// TestMain. It imports only the standard library and the root module.
package fleettest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retryshare"
)

// Share is a module's *Share as the worker uses it.
type Share interface {
	Shared() bool
	// Counts returns the share's Stats: syncs, failed syncs, fallbacks.
	Counts() (syncs, failures, fallbacks int64)
	Close() error
}

// ShareOptions are the share options the tests use, each one that is set
// passed as the retryshare option of its name.
type ShareOptions struct {
	Logger       *slog.Logger  // WithLogger
	SyncInterval time.Duration // WithSyncInterval
	SyncTimeout  time.Duration // WithSyncTimeout
}

func (o ShareOptions) options() []retryshare.Option {
	var opts []retryshare.Option
	if o.Logger != nil {
		opts = append(opts, retryshare.WithLogger(o.Logger))
	}
	if o.SyncInterval != 0 {
		opts = append(opts, retryshare.WithSyncInterval(o.SyncInterval))
	}
	if o.SyncTimeout != 0 {
		opts = append(opts, retryshare.WithSyncTimeout(o.SyncTimeout))
	}
	return opts
}

// Client is a module's store client, configured for the syncs.
type Client struct {
	Store retryshare.Store // the module's ShareStore of the client
	Close func()           // closes the client
}

// ShareBudget shares b through c's Store.
func (c Client) ShareBudget(prefix string, b *retry.Budget, o ShareOptions) (Share, error) {
	return counted(retryshare.Budget(c.Store, prefix, b, o.options()...))
}

// ShareThrottle shares t through c's Store.
func (c Client) ShareThrottle(prefix string, t *retry.Throttle, o ShareOptions) (Share, error) {
	return counted(retryshare.Throttle(c.Store, prefix, t, o.options()...))
}

func counted(s *retryshare.Share, err error) (Share, error) {
	if err != nil {
		return nil, err
	}
	return shareCounts{s}, nil
}

type shareCounts struct{ *retryshare.Share }

func (s shareCounts) Counts() (syncs, failures, fallbacks int64) {
	st := s.Stats()
	return st.Syncs, st.Failures, st.Fallbacks
}

// Adapter is what a module provides to run workers.
type Adapter struct {
	// Dial returns a client for the server at addr.
	Dial func(addr string) (Client, error)
	// Leaks reports leaked goroutines after Close (goleak.Find); nil
	// means no check.
	Leaks func() error
}

// WorkerEnv carries a worker's JSON configuration.
const WorkerEnv = "RETRYKIT_FLEET_WORKER"

// WorkerConfig is one worker's configuration.
type WorkerConfig struct {
	Redis, Backend, Prefix string
	Shared                 bool
	Kind                   string  // "budget", "throttle" or "fault"
	Rate                   float64 // first attempts per second
	Duration               time.Duration
	Budget                 retry.BudgetConfig
	ThrottleK              float64
	ThrottleWindow         time.Duration
}

// Transition is a change of a share's Shared state.
type Transition struct {
	At     int64 // Unix ns
	Shared bool
}

// WorkerResult is what a worker reports to the parent.
type WorkerResult struct {
	Calls        int64        // calls of Do
	Syncs        int64        // successful syncs (budget share, or throttle share)
	Failures     int64        // failed syncs
	Fallbacks    int64        // shared → local switches
	Transitions  []Transition // of the budget share, as polled every 5 ms
	Latencies    []int64      // fault: ns per Do, in call order
	LatencyAt    []int64      // fault: Unix ns of each call's start
	Leak         string       // goleak.Find after Close
	SharedAtJoin bool         // the budget share had joined before Start
}

// WorkerMain runs the worker when the environment says so and exits;
// otherwise it returns false. Call it first in TestMain.
func WorkerMain(a Adapter) bool {
	v := os.Getenv(WorkerEnv)
	if v == "" {
		return false
	}
	var c WorkerConfig
	if err := json.Unmarshal([]byte(v), &c); err != nil {
		fmt.Fprintln(os.Stderr, "worker config:", err)
		os.Exit(2)
	}
	res, err := runWorker(a, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(res)
	os.Exit(0)
	return true
}

var errUnavailable = errors.New("backend: 503")

type overloaded struct{}

func (overloaded) Error() string    { return "backend: 503" }
func (overloaded) Overloaded() bool { return true }

func runWorker(a Adapter, c WorkerConfig) (*WorkerResult, error) {
	res := &WorkerResult{}
	b, err := retry.NewBudget(c.Budget)
	if err != nil {
		return nil, err
	}
	th, err := retry.NewThrottle(retry.ThrottleConfig{K: c.ThrottleK, Window: c.ThrottleWindow})
	if err != nil {
		return nil, err
	}
	rdb, err := a.Dial(c.Redis)
	if err != nil {
		return nil, err
	}
	var bs, ts Share
	quiet := ShareOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if c.Shared {
		if c.Kind != "throttle" {
			if bs, err = rdb.ShareBudget(c.Prefix, b, quiet); err != nil {
				return nil, err
			}
		}
		if c.Kind != "budget" {
			if ts, err = rdb.ShareThrottle(c.Prefix, th, quiet); err != nil {
				return nil, err
			}
		}
	}
	var p retry.Policy
	switch c.Kind {
	case "budget":
		p = retry.Policy{Budget: b, MaxAttempts: 4, Initial: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond, Jitter: retry.NoJitter()}
	case "throttle":
		p = retry.Policy{Throttle: th, MaxAttempts: 1}
	case "fault":
		p = retry.Policy{Budget: b, Throttle: th, MaxAttempts: 2, Initial: retry.Immediate}
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 5 * time.Second}

	// Join the fleet (up to 10 s), say so, and wait for the parent's
	// start time on stdin, so that every worker starts together.
	if bs != nil || ts != nil {
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && !((bs == nil || bs.Shared()) && (ts == nil || ts.Shared())); {
			time.Sleep(5 * time.Millisecond)
		}
		res.SharedAtJoin = (bs == nil || bs.Shared()) && (ts == nil || ts.Shared())
	}
	fmt.Println("ready")
	var startNs int64
	if _, err := fmt.Fscanln(os.Stdin, &startNs); err != nil {
		return nil, fmt.Errorf("read start time: %w", err)
	}
	start := time.Unix(0, startNs)
	time.Sleep(time.Until(start))

	// Poll the share's state for the fault test.
	stopPoll := make(chan struct{})
	var pollDone sync.WaitGroup
	if sh := cmp(bs, ts); sh != nil {
		pollDone.Add(1)
		go func() {
			defer pollDone.Done()
			last := sh.Shared()
			res.Transitions = append(res.Transitions, Transition{time.Now().UnixNano(), last})
			t := time.NewTicker(5 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stopPoll:
					return
				case <-t.C:
					if s := sh.Shared(); s != last {
						last = s
						res.Transitions = append(res.Transitions, Transition{time.Now().UnixNano(), s})
					}
				}
			}
		}()
	}

	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var calls atomic.Int64
	call := func(at time.Time) {
		defer wg.Done()
		calls.Add(1)
		attempt := 0
		op := func(ctx context.Context) error {
			if c.Kind == "fault" {
				return errUnavailable // in memory: only the retry machinery is timed
			}
			attempt++
			req, _ := http.NewRequestWithContext(ctx, "GET", c.Backend, nil)
			req.Header.Set("X-Attempt", strconv.Itoa(attempt))
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				return overloaded{}
			}
			return nil
		}
		t0 := time.Now()
		retry.Do(ctx, p, op)
		if c.Kind == "fault" {
			d := time.Since(t0)
			mu.Lock()
			res.Latencies = append(res.Latencies, int64(d))
			res.LatencyAt = append(res.LatencyAt, at.UnixNano())
			mu.Unlock()
		}
	}
	every := time.Duration(float64(time.Second) / c.Rate)
	end := start.Add(c.Duration)
	for at := start; at.Before(end); at = at.Add(every) {
		time.Sleep(time.Until(at))
		wg.Add(1)
		go call(at)
	}
	wg.Wait()
	close(stopPoll)
	pollDone.Wait()
	res.Calls = calls.Load()
	if sh := cmp(bs, ts); sh != nil {
		res.Syncs, res.Failures, res.Fallbacks = sh.Counts()
	}
	if bs != nil {
		bs.Close()
	}
	if ts != nil {
		ts.Close()
	}
	rdb.Close()
	hc.CloseIdleConnections()
	if a.Leaks != nil {
		if err := a.Leaks(); err != nil {
			res.Leak = err.Error()
		}
	}
	return res, nil
}

func cmp(a, b Share) Share {
	if a != nil {
		return a
	}
	return b
}

// Backend is an always-503 loopback server (or one accepting up to
// perTick requests per 100 ms) that records every request.
type Backend struct {
	srv      *httptest.Server
	perTick  int // 0: accept nothing
	mu       sync.Mutex
	start    time.Time
	events   []Event
	tick     int64
	accepted int
}

// Event is one request the backend saw.
type Event struct {
	At       time.Duration // since start
	First    bool          // X-Attempt: 1
	Accepted bool          // answered 200, not 503
}

// NewBackend starts a backend, closed when t ends; perTick 0 accepts
// nothing.
func NewBackend(t *testing.T, perTick int) *Backend {
	b := &Backend{perTick: perTick, start: time.Now()}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		at := time.Since(b.start)
		ok := false
		if b.perTick > 0 {
			if k := int64(at / (100 * time.Millisecond)); k != b.tick {
				b.tick, b.accepted = k, 0
			}
			if b.accepted < b.perTick {
				b.accepted++
				ok = true
			}
		}
		b.events = append(b.events, Event{at, r.Header.Get("X-Attempt") == "1", ok})
		b.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// URL returns the backend's URL.
func (b *Backend) URL() string { return b.srv.URL }

// Snapshot returns the events so far.
func (b *Backend) Snapshot() []Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.events)
}

// RunFleet starts one busy and n-1 quiet workers, starts them together
// once all have joined, and returns their results. started, if not nil,
// receives the common start time.
func RunFleet(t *testing.T, n int, c WorkerConfig, busyRate, quietRate float64, started chan<- time.Time) []*WorkerResult {
	t.Helper()
	type worker struct {
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout *bufio.Reader
		stderr *limitedBuffer
	}
	ws := make([]worker, n)
	for i := range n {
		wc := c
		wc.Rate = quietRate
		if i == 0 {
			wc.Rate = busyRate
		}
		js, _ := json.Marshal(wc)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), WorkerEnv+"="+string(js))
		redistest.KillWithParent(cmd) // a worker dies with the test that started it
		w := worker{cmd: cmd, stderr: &limitedBuffer{}}
		cmd.Stderr = w.stderr
		var err error
		if w.stdin, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		w.stdout = bufio.NewReader(out)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		ws[i] = w
	}
	for i, w := range ws {
		if line, err := w.stdout.ReadString('\n'); line != "ready\n" {
			t.Fatalf("worker %d: %q, %v: %s", i, line, err, w.stderr.String())
		}
	}
	start := time.Now().Add(100 * time.Millisecond)
	for _, w := range ws {
		fmt.Fprintln(w.stdin, start.UnixNano())
	}
	if started != nil {
		started <- start
	}
	res := make([]*WorkerResult, n)
	for i, w := range ws {
		var r WorkerResult
		if err := json.NewDecoder(w.stdout).Decode(&r); err != nil {
			t.Errorf("worker %d: %v: %s", i, err, w.stderr.String())
			continue
		}
		if err := w.cmd.Wait(); err != nil {
			t.Errorf("worker %d: %v: %s", i, err, w.stderr.String())
		}
		res[i] = &r
	}
	if t.Failed() {
		t.FailNow()
	}
	return res
}

type limitedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.b) < 1<<16 {
		l.b = append(l.b, p...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

// NeedProcesses skips t with -short.
func NeedProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process fleet test: skipped with -short")
	}
}
