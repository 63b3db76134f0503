package sim

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/defaults"
	"github.com/retrykit/retry/internal/quantile"
)

// Defaults of a [HedgeScenario], used where a field is zero.
const (
	DefaultHedgeRequests   = 50000
	DefaultHedgeRate       = 1000.0 // requests per second
	DefaultLatencyMean     = 5 * time.Millisecond
	DefaultLatencySigma    = 0.5
	DefaultSlowPeriod      = 100 * time.Millisecond
	DefaultSlowFactor      = 10.0
	maxHedgeRequests       = 10_000_000
	maxHedgeCopiesModelled = 16

	// HedgeBytesPerRequest is the memory a hedging run takes per request,
	// as peak RSS of `retry simulate hedge` measured it (2026-12-07: 496
	// MB at 1 million requests, 785 MB at 2 million, so at most 500
	// bytes each): 152 bytes of state and 8 of latency per request, the
	// rest the runtime and the garbage collector's headroom between the
	// runs of a HedgeCurve. HedgeScenario.MaxMemory bounds Requests ×
	// HedgeBytesPerRequest.
	HedgeBytesPerRequest = 500
)

// Latency is the latency distribution of one copy of a request: lognormal
// with mean Mean and shape Sigma, then with probability Stragglers
// multiplied by StragglerFactor, and with probability Tail replaced by
// TailLatency. Each copy draws its own latency, independently.
type Latency struct {
	Mean            time.Duration // zero: DefaultLatencyMean (5 ms)
	Sigma           float64       // the lognormal's shape; zero: DefaultLatencySigma (0.5); negative: every latency is Mean
	Stragglers      float64       // fraction of copies slowed by StragglerFactor, in [0, 1]
	StragglerFactor float64       // zero: 10
	Tail            float64       // fraction of copies that take TailLatency, in [0, 1]
	TailLatency     time.Duration // zero: 1 s
}

// HedgeScenario is a hedging experiment: Requests requests arriving
// evenly at Rate per second, each sent as hedged copies by the rules of
// retry.Hedge (a fixed or adaptive delay, MaxCopies in flight, every copy
// beyond the first drawn from Budget), whose latencies follow Latency.
// Copies never fail: the model is about slowness. With Correlated above
// zero, time is cut into periods of SlowPeriod and each period is slow
// with probability Correlated: every copy sent in a slow period takes
// SlowFactor times longer, which hedging cannot escape (a slow-everything
// outage, at Correlated 1).
type HedgeScenario struct {
	Requests   int     // zero: DefaultHedgeRequests (50,000)
	Rate       float64 // zero: DefaultHedgeRate (1,000/s)
	Latency    Latency
	Correlated float64       // fraction of slow periods, in [0, 1]
	SlowPeriod time.Duration // zero: DefaultSlowPeriod (100 ms)
	SlowFactor float64       // zero: DefaultSlowFactor (10)

	// Hedge is the hedging rule, as retry.NewHedger takes it (FixedDelay for a
	// fixed delay, else adaptive from Quantile, MinDelay, WarmUp, Samples;
	// MaxCopies up to 16). Nil means no hedging.
	Hedge *retry.HedgeConfig

	// Budget, when set, is the retry budget every copy beyond the first
	// draws on (retry.Budget's rule in virtual time). Nil means none.
	Budget *retry.BudgetConfig

	Seed uint64 // the random stream; the same Seed gives the same result

	// MaxMemory is the most memory the run may take, in bytes: a scenario
	// whose Requests × HedgeBytesPerRequest is larger is refused. Zero
	// means DefaultMaxMemory (4 GiB); negative means no limit.
	MaxMemory int64
}

// HedgeResult is what [RunHedge] measured.
type HedgeResult struct {
	P50, P95, P99, P999 time.Duration // latency percentiles of the requests
	Max                 time.Duration
	Copies              int     // copies sent in all
	Extra               float64 // copies beyond the first, per request: the extra load
	Refused             int     // hedges the budget refused
	Won                 int     // requests a hedge answered
}

// hedgeEvent is a pending event of request req: a hedge decision (copy > 0,
// the copy to send) or its completion (copy == 0).
type hedgeEvent struct {
	at   int64
	req  int32
	copy int8
}

type hedgeQueue []hedgeEvent

func (q hedgeQueue) Len() int { return len(q) }
func (q hedgeQueue) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && (q[i].req < q[j].req || q[i].req == q[j].req && q[i].copy < q[j].copy)
}
func (q hedgeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *hedgeQueue) Push(x any)   { *q = append(*q, x.(hedgeEvent)) }
func (q *hedgeQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// hedgeReq is one request in flight.
type hedgeReq struct {
	start, end int64 // arrival; the earliest finish of the copies sent
	starts     [maxHedgeCopiesModelled]int64
	sent       int8
	winner     int8
	done       bool
}

// Validate reports the first field of s that makes no sense, in an error
// that wraps [ErrScenario]; RunHedge makes the same check.
func (s HedgeScenario) Validate() error {
	_, err := s.resolve()
	return err
}

func (s *HedgeScenario) resolve() (h retry.HedgeConfig, err error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrScenario}, a...)...)
	}
	l := &s.Latency
	switch {
	case s.Requests < 0 || s.Requests > maxHedgeRequests:
		return h, bad("HedgeScenario.Requests %d is not in [0, %d]", s.Requests, maxHedgeRequests)
	case s.Rate < 0 || math.IsNaN(s.Rate) || math.IsInf(s.Rate, 0):
		return h, bad("HedgeScenario.Rate %v is not a finite non-negative number", s.Rate)
	case l.Mean < 0 || l.TailLatency < 0:
		return h, bad("Latency.Mean and TailLatency must not be negative")
	case math.IsNaN(l.Sigma) || math.IsInf(l.Sigma, 0) || l.Sigma > 5:
		return h, bad("Latency.Sigma %v is not a number up to 5", l.Sigma)
	case !(l.Stragglers >= 0 && l.Stragglers <= 1) || !(l.Tail >= 0 && l.Tail <= 1):
		return h, bad("Latency.Stragglers and Tail must be fractions in [0, 1]")
	case !(l.StragglerFactor >= 0 && l.StragglerFactor <= 1e6) || !(s.SlowFactor >= 0 && s.SlowFactor <= 1e6):
		return h, bad("StragglerFactor and SlowFactor must be in [0, 1e6]")
	case !(s.Correlated >= 0 && s.Correlated <= 1):
		return h, bad("HedgeScenario.Correlated %v is not a fraction in [0, 1]", s.Correlated)
	case s.SlowPeriod < 0:
		return h, bad("HedgeScenario.SlowPeriod %v is negative", s.SlowPeriod)
	case s.Rate > MaxOpenRate:
		return h, bad("HedgeScenario.Rate %v is over %.0e per second, one request per nanosecond, the model's resolution", s.Rate, MaxOpenRate)
	}
	if s.Requests == 0 {
		s.Requests = DefaultHedgeRequests
	}
	if s.Rate == 0 {
		s.Rate = DefaultHedgeRate
	}
	if l.Mean == 0 {
		l.Mean = DefaultLatencyMean
	}
	if l.Sigma == 0 {
		l.Sigma = DefaultLatencySigma
	}
	if l.StragglerFactor == 0 {
		l.StragglerFactor = 10
	}
	if l.TailLatency == 0 {
		l.TailLatency = time.Second
	}
	if s.SlowPeriod == 0 {
		s.SlowPeriod = DefaultSlowPeriod
	}
	if s.SlowFactor == 0 {
		s.SlowFactor = DefaultSlowFactor
	}
	// Virtual time is int64 nanoseconds: the last arrival, plus a latency
	// (at most maxHedgeLatency) and a hedge delay (at most another), must
	// not wrap.
	if span := float64(s.Requests-1) * 1e9 / s.Rate; !(span <= maxHedgeLatency) {
		return h, bad("HedgeScenario.Requests %d at Rate %v/s arrive over %.3g s, over the model's %v",
			s.Requests, s.Rate, span/1e9, time.Duration(maxHedgeLatency))
	}
	if s.MaxMemory == 0 {
		s.MaxMemory = DefaultMaxMemory
	}
	if need := int64(s.Requests) * HedgeBytesPerRequest; s.MaxMemory > 0 && need > s.MaxMemory {
		return h, bad("HedgeScenario.Requests %d need about %s (%d bytes each), over MaxMemory %s",
			s.Requests, byteSize(need), HedgeBytesPerRequest, byteSize(s.MaxMemory))
	}
	if s.Hedge != nil {
		h = *s.Hedge
		if _, err := retry.NewHedger(h); err != nil {
			return h, fmt.Errorf("%w: %w", ErrScenario, err)
		}
		if h.MaxCopies == 0 {
			h.MaxCopies = defaults.HedgeMaxCopies
		}
		if h.MaxCopies > maxHedgeCopiesModelled {
			return h, bad("HedgeConfig.MaxCopies %d is above %d", h.MaxCopies, maxHedgeCopiesModelled)
		}
		if h.FixedDelay == 0 {
			h.Quantile = cmp0(h.Quantile, defaults.HedgeQuantile)
			h.MinDelay = cmp0(h.MinDelay, defaults.HedgeMinDelay)
			h.WarmUp = cmp0(h.WarmUp, defaults.HedgeWarmUp)
			h.Samples = cmp0(h.Samples, defaults.HedgeSamples)
		}
	} else {
		h.MaxCopies = 1
	}
	if s.Budget != nil {
		if _, err := retry.NewBudget(*s.Budget); err != nil {
			return h, fmt.Errorf("%w: %w", ErrScenario, err)
		}
	}
	return h, nil
}

func cmp0[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// RunHedge runs the hedging scenario s and reports the latency
// percentiles and the extra load. It is deterministic for a given s. The
// adaptive rule is retry.Hedger's, re-implemented in virtual time: the
// delay is the Quantile of the last Samples latencies (a winner's, and a
// cancelled copy's time so far when at least the current delay),
// recomputed every Samples/16, with the floor and the warm-up.
func RunHedge(ctx context.Context, s HedgeScenario) (HedgeResult, error) {
	hc, err := s.resolve()
	if err != nil {
		return HedgeResult{}, err
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x68656467)) // "hedg"
	n := s.Requests
	reqs := make([]hedgeReq, n)
	var q hedgeQueue
	var budget budgetModel
	if s.Budget != nil {
		budget.init(*s.Budget, 1, true)
	}
	ad := adaptiveModel{fixed: int64(hc.FixedDelay),
		w: quantile.Window{Size: hc.Samples, WarmUp: hc.WarmUp, Quantile: hc.Quantile, Floor: int64(hc.MinDelay)}}
	gap := int64(float64(time.Second) / s.Rate)
	var res HedgeResult
	lat := s.latencySampler(rng)
	send := func(i int32, k int8, now int64) {
		r := &reqs[i]
		r.starts[k] = now
		r.sent = k + 1
		res.Copies++
		if end := now + lat(now); end < r.end || k == 0 {
			r.end, r.winner = end, k
			heap.Push(&q, hedgeEvent{at: end, req: i})
		}
		if int(k)+1 < hc.MaxCopies && s.Hedge != nil {
			if d, ok := ad.delay(); ok {
				heap.Push(&q, hedgeEvent{at: addSat(now, d), req: i, copy: k + 1})
			}
		}
	}
	next := 0 // the next request to arrive
	for step := 0; next < n || len(q) > 0; step++ {
		if step&0xffff == 0 && ctx.Err() != nil {
			return HedgeResult{}, ctx.Err()
		}
		if next < n && (len(q) == 0 || int64(next)*gap <= q[0].at) {
			now := int64(next) * gap
			reqs[next].start = now
			if budget.on {
				budget.first(0, now)
			}
			send(int32(next), 0, now)
			next++
			continue
		}
		e := heap.Pop(&q).(hedgeEvent)
		r := &reqs[e.req]
		if r.done {
			continue
		}
		if e.copy == 0 {
			if e.at != r.end {
				continue // a copy that lost
			}
			r.done = true
			if r.winner > 0 {
				res.Won++
			}
			ad.observe(e.at - r.starts[r.winner])
			for k := int8(0); k < r.sent; k++ {
				if k != r.winner {
					ad.observeLoser(e.at - r.starts[k])
				}
			}
			continue
		}
		if e.at >= r.end || e.copy != r.sent {
			continue
		}
		if budget.on && !budget.allow(0, e.at) {
			res.Refused++
			continue
		}
		send(e.req, e.copy, e.at)
	}
	lats := make([]int64, n)
	for i := range reqs {
		lats[i] = reqs[i].end - reqs[i].start
	}
	slices.Sort(lats)
	pct := func(p float64) time.Duration {
		return time.Duration(lats[max(int(math.Ceil(p*float64(n)))-1, 0)])
	}
	res.P50, res.P95, res.P99, res.P999, res.Max = pct(0.5), pct(0.95), pct(0.99), pct(0.999), time.Duration(lats[n-1])
	res.Extra = float64(res.Copies-n) / float64(n)
	return res, nil
}

// latencySampler returns the function drawing a copy's latency, in ns,
// for a copy sent at virtual time now.
func (s *HedgeScenario) latencySampler(rng *rand.Rand) func(now int64) int64 {
	l := s.Latency
	mu := math.Log(float64(l.Mean)) - l.Sigma*l.Sigma/2
	period := int64(s.SlowPeriod)
	return func(now int64) int64 {
		var d float64
		if l.Sigma < 0 {
			d = float64(l.Mean)
		} else {
			d = math.Exp(mu + l.Sigma*rng.NormFloat64())
		}
		if l.Stragglers > 0 && rng.Float64() < l.Stragglers {
			d *= l.StragglerFactor
		}
		if l.Tail > 0 && rng.Float64() < l.Tail {
			d = float64(l.TailLatency)
		}
		if s.Correlated > 0 && slowPeriod(s.Seed, now/period) < s.Correlated {
			d *= s.SlowFactor
		}
		return int64(min(max(d, 1), maxHedgeLatency))
	}
}

// maxHedgeLatency caps a copy's latency, and the span of the arrivals, at
// about 73 years, so that an arrival plus a latency plus a hedge delay
// (itself a latency at most) stays below math.MaxInt64.
const maxHedgeLatency = float64(math.MaxInt64 / 4)

// slowPeriod maps period k to a uniform number in [0, 1), the same for
// every copy sent in it (splitmix64).
func slowPeriod(seed uint64, k int64) float64 {
	z := seed ^ uint64(k)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

// adaptiveModel is retry.Hedger's delay rule in virtual time.
type adaptiveModel struct {
	fixed int64 // the fixed delay; zero for an adaptive one
	w     quantile.Window
}

func (a *adaptiveModel) delay() (int64, bool) {
	if a.fixed > 0 {
		return a.fixed, true
	}
	v := a.w.Value()
	return v, v > 0
}

// observeLoser records a cancelled copy's time so far, a lower bound of
// its latency, when it is at least the current delay, as retry.Hedger
// does.
func (a *adaptiveModel) observeLoser(d int64) {
	if cur, ok := a.delay(); ok && d >= cur {
		a.observe(d)
	}
}

func (a *adaptiveModel) observe(d int64) {
	if a.fixed == 0 && a.w.Size > 0 {
		a.w.Add(d)
	}
}

// CurvePoint is one row of [HedgeCurve]: a hedge rule and what it gave.
type CurvePoint struct {
	Name   string // "none", "fixed p90 (12ms)", "adaptive p90", with "+budget" when budgeted
	Result HedgeResult
}

// HedgeCurve runs s without hedging, then with fixed delays at the
// quantiles qs of the unhedged latencies outside slow periods (what one
// would tune on a healthy system; with Correlated 0, simply the unhedged
// latencies) and with adaptive delays at the same quantiles, each without and, when budget is set, with that Budget:
// the curve of p99 and p99.9 against extra load. s.Hedge gives the other
// settings (MaxCopies, WarmUp, Samples, MinDelay; nil means the defaults,
// MaxCopies 2); its Delay and Quantile are replaced. Every point uses
// s.Seed.
func HedgeCurve(ctx context.Context, s HedgeScenario, qs []float64, budget *retry.BudgetConfig) ([]CurvePoint, error) {
	for _, q := range qs {
		if !(q > 0 && q < 1) {
			return nil, fmt.Errorf("%w: quantile %v is not in (0, 1)", ErrScenario, q)
		}
	}
	base := retry.HedgeConfig{MaxCopies: 2}
	if s.Hedge != nil {
		base = *s.Hedge
		base.FixedDelay, base.Quantile = 0, 0
	}
	none := s
	none.Hedge, none.Budget = nil, nil
	// The unhedged latencies, for the fixed delays.
	if _, err := none.resolve(); err != nil {
		return nil, err
	}
	r0, err := RunHedge(ctx, none)
	if err != nil {
		return nil, err
	}
	healthy := none
	healthy.Correlated = 0
	lats, err := unhedgedQuantiles(ctx, healthy, qs)
	if err != nil {
		return nil, err
	}
	out := []CurvePoint{{Name: "none", Result: r0}}
	budgets := []*retry.BudgetConfig{nil}
	if budget != nil {
		budgets = append(budgets, budget)
	}
	for _, b := range budgets {
		suffix := ""
		if b != nil {
			suffix = " +budget"
		}
		for i, q := range qs {
			for _, adaptive := range []bool{false, true} {
				h := base
				name := fmt.Sprintf("fixed %s (%v)", quantileName(q), lats[i].Round(10*time.Microsecond))
				if adaptive {
					h.Quantile = q
					name = "adaptive " + quantileName(q)
				} else {
					h.FixedDelay = lats[i]
				}
				run := s
				run.Hedge, run.Budget = &h, b
				r, err := RunHedge(ctx, run)
				if err != nil {
					return nil, err
				}
				out = append(out, CurvePoint{Name: name + suffix, Result: r})
			}
		}
	}
	return out, nil
}

// unhedgedQuantiles returns the quantiles qs of the latencies of s run
// without hedging.
func unhedgedQuantiles(ctx context.Context, s HedgeScenario, qs []float64) ([]time.Duration, error) {
	if _, err := s.resolve(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x68656467))
	lat := s.latencySampler(rng)
	gap := int64(float64(time.Second) / s.Rate)
	l := make([]int64, s.Requests)
	for i := range l {
		if i&0xffff == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		l[i] = lat(int64(i) * gap)
	}
	slices.Sort(l)
	out := make([]time.Duration, len(qs))
	for i, q := range qs {
		out[i] = time.Duration(l[max(int(math.Ceil(q*float64(len(l))))-1, 0)])
	}
	return out, nil
}

func quantileName(q float64) string {
	return "p" + trimFloat(q*100)
}

func trimFloat(f float64) string {
	s := fmt.Sprintf("%.3f", f)
	for s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}
