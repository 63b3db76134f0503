package retrytest

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/retrykit/retry/internal/netreset"
)

// ChaosConfig says which faults a [Chaos] injects and how often. The zero
// ChaosConfig injects none.
type ChaosConfig struct {
	// Rate is the probability, in [0, 1], that a request gets a fault.
	// Zero means never; 1 means every request.
	Rate float64
	// Faults is the mix drawn from, uniformly; list a fault several times
	// to weight it. A fault's Status answers without passing the request
	// on; a zero Status passes it on after the fault's Latency; Err fails
	// it unsent; Lost passes it on and drops the reply. Nil means
	// [DefaultFaults]().
	Faults []Reply
	// Seed seeds the draws: with the same seed, the same sequence of
	// requests gets the same faults. Concurrent requests draw in the order
	// they arrive.
	Seed uint64
}

// DefaultFaults returns the mix a [Chaos] draws from when its Faults are
// nil, each once: a 503; a 429 with Retry-After: 1; one second of latency
// before the request is passed on; a connection reset before the request
// is sent; a lost reply.
func DefaultFaults() []Reply {
	return []Reply{
		{Status: http.StatusServiceUnavailable},
		{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}},
		{Latency: time.Second},
		{Err: errConnReset()},
		{Lost: true},
	}
}

// ChaosCount is what a [Chaos] did so far.
type ChaosCount struct {
	Requests  int // requests seen
	Faults    int // requests that got a fault
	Forwarded int // requests passed on: those without a fault, delayed ones and lost replies
	Lost      int // requests passed on whose reply was dropped
}

// Chaos injects faults into a share of requests, drawn per request from a
// seeded generator: Polly's injection rate, go-fault's percentages. The
// same Chaos serves as an http.RoundTripper in front of a client's
// transport ([Chaos.Transport]) and as server middleware
// ([Chaos.Middleware]); both share its draws and counts. Get one with
// [NewChaos]; it is safe for concurrent use.
type Chaos struct {
	rate   float64
	faults []Reply

	mu    sync.Mutex
	rng   *rand.Rand
	count ChaosCount
}

// NewChaos returns a Chaos for cfg, or an error naming the field of cfg
// that makes no sense.
func NewChaos(cfg ChaosConfig) (*Chaos, error) {
	if !(cfg.Rate >= 0 && cfg.Rate <= 1) {
		return nil, fmt.Errorf("retrytest: ChaosConfig.Rate %v is outside [0, 1]", cfg.Rate)
	}
	faults := cfg.Faults
	if faults == nil {
		faults = DefaultFaults()
	}
	if len(faults) == 0 {
		return nil, fmt.Errorf("retrytest: ChaosConfig.Faults is empty (nil means DefaultFaults)")
	}
	for i, f := range faults {
		if f.Status != 0 && (f.Status < 100 || f.Status > 999) {
			return nil, fmt.Errorf("retrytest: ChaosConfig.Faults[%d].Status %d is not a status code", i, f.Status)
		}
		if f.Latency < 0 {
			return nil, fmt.Errorf("retrytest: ChaosConfig.Faults[%d].Latency %v is negative", i, f.Latency)
		}
	}
	return &Chaos{rate: cfg.Rate, faults: append([]Reply(nil), faults...),
		rng: newRand(cfg.Seed)}, nil
}

// newRand returns the generator of a seed, for Chaos and AtRate.
func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x6a09e667f3bcc909))
}

// Count returns what c did so far.
func (c *Chaos) Count() ChaosCount {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}

// draw counts one request and returns its fault, or nil for none.
func (c *Chaos) draw() *Reply {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count.Requests++
	if c.rate == 0 || c.rng.Float64() >= c.rate {
		c.count.Forwarded++
		return nil
	}
	f := &c.faults[c.rng.IntN(len(c.faults))]
	c.count.Faults++
	if f.Err == nil && (f.Lost || f.Status == 0) {
		c.count.Forwarded++
	}
	if f.Err == nil && f.Lost {
		c.count.Lost++
	}
	return f
}

// Transport returns an http.RoundTripper that sends requests through base
// (nil means http.DefaultTransport), injecting c's faults: a fault's
// latency waits on the clock before the request is passed on or answered;
// a status answers without sending; an error is returned unsent; a lost
// reply is sent, its response discarded, and a connection reset returned.
func (c *Chaos) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &chaosTransport{c: c, base: base}
}

type chaosTransport struct {
	c    *Chaos
	base http.RoundTripper
}

func (t *chaosTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	f := t.c.draw()
	if f == nil {
		return t.base.RoundTrip(req)
	}
	if err := wait(req, f.Latency); err != nil {
		closeBody(req)
		return nil, err
	}
	switch {
	case f.Err != nil:
		closeBody(req)
		return nil, f.Err
	case f.Lost:
		resp, err := t.base.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		return nil, errConnReset()
	case f.Status != 0:
		closeBody(req)
		return response(req, f), nil
	}
	return t.base.RoundTrip(req)
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// Middleware returns an http.Handler that serves requests with next,
// injecting c's faults: a fault's latency waits before next is called or
// the fault answers; a status answers without calling next; an error
// resets the connection without calling next; a lost reply calls next,
// discards what it writes and resets the connection.
func (c *Chaos) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := c.draw()
		if f == nil {
			next.ServeHTTP(w, r)
			return
		}
		if wait(r, f.Latency) != nil {
			return
		}
		switch {
		case f.Err != nil:
			netreset.Response(w)
		case f.Lost:
			next.ServeHTTP(&discard{h: http.Header{}}, r)
			netreset.Response(w)
		case f.Status != 0:
			writeReply(w, f)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// discard is a ResponseWriter that drops what a handler writes.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
