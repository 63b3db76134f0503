package bench

import (
	"context"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cristalhq/hedgedhttp"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"

	retry "github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

// The hedging workloads: a loopback server whose every request (every
// copy) takes a latency drawn from one seeded stream, in arrival order:
//   - a: lognormal, mean 5 ms (sigma 0.5), 5 % stragglers at 10x
//     (bhope/hedge's published setup);
//   - b: the same lognormal, 1 % of requests taking 1 s (The Tail at Scale's shape);
//   - outage: every request slow, the lognormal at 10x, with the delays
//     tuned on a (the failure case of hedging).
//
// hedgeRequests requests per library, hedgeWorkers at a time, the
// libraries taking turns (runHedgeLibs). Each library sends at most 2
// copies (retrykit through MaxAttempts 2). Run with RETRYKIT_HEDGE_BENCH=1
// and -benchtime 1x; the figures are the metrics (p50-ms ... p99.9-ms,
// extra-%), not ns/op.
const (
	hedgeRequests       = 50000
	hedgeOutageRequests = 10000
	hedgeWorkers        = 16
	hedgeSeed           = 26
)

// skipHedge skips the hedging workloads unless RETRYKIT_HEDGE_BENCH=1:
// they take minutes and report percentiles, not times, so bench/run.sh's
// rounds of every benchmark leave them out.
func skipHedge(b *testing.B) {
	if os.Getenv("RETRYKIT_HEDGE_BENCH") != "1" {
		b.Skip("set RETRYKIT_HEDGE_BENCH=1 to run the hedging workloads (about 12 minutes)")
	}
}

type hedgeShape struct {
	name string
	n    int
	draw func(r *rand.Rand) time.Duration
}

func lognormal5ms(r *rand.Rand) time.Duration {
	const sigma = 0.5
	mu := math.Log(float64(5*time.Millisecond)) - sigma*sigma/2
	return time.Duration(math.Exp(mu + sigma*r.NormFloat64()))
}

var hedgeShapes = []hedgeShape{
	{"a", hedgeRequests, func(r *rand.Rand) time.Duration {
		d := lognormal5ms(r)
		if r.Float64() < 0.05 {
			d *= 10
		}
		return d
	}},
	{"b", hedgeRequests, func(r *rand.Rand) time.Duration {
		d := lognormal5ms(r)
		if r.Float64() < 0.01 {
			d = time.Second
		}
		return d
	}},
}

// quantileOf returns the quantile q of shape's latencies, from a million
// draws of another stream.
func quantileOf(draw func(*rand.Rand) time.Duration, q float64) time.Duration {
	r := rand.New(rand.NewPCG(1, 2))
	l := make([]time.Duration, 1_000_000)
	for i := range l {
		l[i] = draw(r)
	}
	slices.Sort(l)
	return l[int(q*float64(len(l)))-1]
}

// hedgeServer serves every request after a latency from its stream; a
// request whose client goes away ends at once.
type hedgeServer struct {
	mu   sync.Mutex
	rng  *rand.Rand
	draw func(*rand.Rand) time.Duration
	seen atomic.Int64
}

func (s *hedgeServer) reset(draw func(*rand.Rand) time.Duration, round uint64) {
	s.mu.Lock()
	s.rng, s.draw = rand.New(rand.NewPCG(hedgeSeed, round)), draw
	s.mu.Unlock()
	s.seen.Store(0)
}

func (s *hedgeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.seen.Add(1)
	s.mu.Lock()
	d := s.draw(s.rng)
	s.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		io.WriteString(w, "ok")
	case <-r.Context().Done():
	}
}

type hedgeLib struct {
	name string
	rt   func(base http.RoundTripper) http.RoundTripper
}

func retrykitHedge(h *retry.Hedger, b *retry.Budget) func(http.RoundTripper) http.RoundTripper {
	return func(base http.RoundTripper) http.RoundTripper {
		return &retryhttp.Transport{Base: base, Hedge: h, Policy: retry.Policy{Budget: b, MaxAttempts: 2}}
	}
}

func fixedHedger(b *testing.B, d time.Duration) *retry.Hedger {
	h, err := retry.NewHedger(retry.HedgeConfig{FixedDelay: d, MaxCopies: 2})
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// adaptiveHedger is retrykit's adaptive Hedger at quantile q, its other
// settings the defaults but for 2 copies.
func adaptiveHedger(b *testing.B, q float64) *retry.Hedger {
	h, err := retry.NewHedger(retry.HedgeConfig{Quantile: q, MaxCopies: 2})
	if err != nil {
		b.Fatal(err)
	}
	return h
}

func hedgedhttpRT(b *testing.B, d time.Duration) func(http.RoundTripper) http.RoundTripper {
	return func(base http.RoundTripper) http.RoundTripper {
		rt, err := hedgedhttp.NewRoundTripper(d, 2, base)
		if err != nil {
			b.Fatal(err)
		}
		return rt
	}
}

func failsafeRT(p hedgepolicy.HedgePolicy[*http.Response]) func(http.RoundTripper) http.RoundTripper {
	return func(base http.RoundTripper) http.RoundTripper { return failsafehttp.NewRoundTripper(base, p) }
}

// BenchmarkHedgeTail runs each shape through every library: no hedging,
// retrykit with fixed delays at the shape's p90, p92 and p95, with the
// zero (adaptive, quantile 0.95) Hedger and adaptive at quantile 0.9,
// cristalhq/hedgedhttp at p90, p92 and p95, and failsafe-go's hedge
// policy at p95 and adaptive at quantiles 0.95 and 0.9.
func BenchmarkHedgeTail(b *testing.B) {
	skipHedge(b)
	for _, sh := range hedgeShapes {
		p90, p92, p95 := quantileOf(sh.draw, 0.90), quantileOf(sh.draw, 0.92), quantileOf(sh.draw, 0.95)
		b.Logf("shape %s: p90 %v, p92 %v, p95 %v", sh.name, p90, p92, p95)
		runHedgeLibs(b, sh, []hedgeLib{
			{"none", func(base http.RoundTripper) http.RoundTripper { return base }},
			{"retrykit-p90", retrykitHedge(fixedHedger(b, p90), nil)},
			{"retrykit-p92", retrykitHedge(fixedHedger(b, p92), nil)},
			{"retrykit-p95", retrykitHedge(fixedHedger(b, p95), nil)},
			{"retrykit-adaptive", retrykitHedge(&retry.Hedger{}, nil)},
			{"retrykit-adaptive-q90", retrykitHedge(adaptiveHedger(b, 0.9), nil)},
			{"hedgedhttp-p90", hedgedhttpRT(b, p90)},
			{"hedgedhttp-p92", hedgedhttpRT(b, p92)},
			{"hedgedhttp-p95", hedgedhttpRT(b, p95)},
			{"failsafe-p95", failsafeRT(hedgepolicy.NewWithDelay[*http.Response](p95))},
			{"failsafe-adaptive", failsafeRT(hedgepolicy.NewWithDelayQuantile[*http.Response](0.95, 1000, 100))},
			{"failsafe-adaptive-q90", failsafeRT(hedgepolicy.NewWithDelayQuantile[*http.Response](0.9, 1000, 100))},
		})
	}
}

// BenchmarkHedgeOutage: every request slow, delays tuned on shape a's p95.
// Without a budget every request sends its hedge (the load doubles); with
// a Budget of ratio 0.1 the hedges stay near 10 % of requests, a little
// more with its default floor of 1 a second, at most 10 % without it.
func BenchmarkHedgeOutage(b *testing.B) {
	skipHedge(b)
	p95 := quantileOf(hedgeShapes[0].draw, 0.95)
	outage := hedgeShape{"outage", hedgeOutageRequests, func(r *rand.Rand) time.Duration { return 10 * lognormal5ms(r) }}
	bg, err := retry.NewBudget(retry.BudgetConfig{Ratio: 0.1})
	if err != nil {
		b.Fatal(err)
	}
	bn, err := retry.NewBudget(retry.BudgetConfig{Ratio: 0.1, MinPerSecond: -1})
	if err != nil {
		b.Fatal(err)
	}
	runHedgeLibs(b, outage, []hedgeLib{
		{"none", func(base http.RoundTripper) http.RoundTripper { return base }},
		{"retrykit-p95", retrykitHedge(fixedHedger(b, p95), nil)},
		{"retrykit-p95-budget", retrykitHedge(fixedHedger(b, p95), bg)},
		{"retrykit-p95-budget-nofloor", retrykitHedge(fixedHedger(b, p95), bn)},
		{"hedgedhttp-p95", hedgedhttpRT(b, p95)},
	})
}

// hedgeRounds is how many slices each run is cut into: the libraries take
// turns slice by slice (each slice served from the same seeded stream), so
// that a stall of this shared machine lands on all of them alike rather
// than on one library's whole run.
const hedgeRounds = 10

// runHedgeLibs sends sh.n requests through each library, hedgeWorkers at
// a time, interleaved by slices, and reports each library's percentiles
// and extra requests as a sub-benchmark's metrics.
func runHedgeLibs(b *testing.B, sh hedgeShape, libs []hedgeLib) {
	srv := &hedgeServer{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	clients := make([]*http.Client, len(libs))
	for i, lib := range libs {
		base := &http.Transport{MaxIdleConnsPerHost: 4 * hedgeWorkers}
		defer base.CloseIdleConnections()
		clients[i] = &http.Client{Transport: lib.rt(base)}
	}
	lat := make([][]time.Duration, len(libs))
	sent := make([]int64, len(libs))
	per := sh.n / hedgeRounds
	for r := range hedgeRounds {
		for i := range libs {
			srv.reset(sh.draw, uint64(r))
			lat[i] = append(lat[i], hedgeSlice(b, clients[i], ts.URL, per)...)
			sent[i] += srv.seen.Load()
		}
	}
	for i, lib := range libs {
		b.Run("shape="+sh.name+"/lib="+lib.name, func(b *testing.B) {
			for b.Loop() {
			}
			l := lat[i]
			slices.Sort(l)
			q := func(p float64) float64 { return float64(l[int(math.Ceil(p*float64(len(l))))-1]) / 1e6 }
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.95), "p95-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(q(0.999), "p99.9-ms")
			b.ReportMetric(100*float64(sent[i]-int64(len(l)))/float64(len(l)), "extra-%")
		})
	}
}

// hedgeSlice sends n GETs to url through c, hedgeWorkers at a time, and
// returns their latencies (body read and closed).
func hedgeSlice(b *testing.B, c *http.Client, url string, n int) []time.Duration {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range hedgeWorkers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				start := time.Now()
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
				resp, err := c.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat[i] = time.Since(start)
			}
		})
	}
	wg.Wait()
	return lat
}
