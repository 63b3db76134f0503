package sim_test

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/sim"
)

func runOpen(t *testing.T, s sim.OpenScenario) sim.OpenResult {
	t.Helper()
	r, err := sim.RunOpen(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// skipFullScale skips a full-scale Huang run under -race, where it takes
// minutes; scripts/test-all.sh runs these tests without -race as well.
func skipFullScale(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("full-scale open-model runs are tested without -race (scripts/test-all.sh)")
	}
}

// Below capacity and with no trigger every call succeeds at its first
// attempt: goodput is the arrivals, one attempt per call.
func TestOpenSteadyState(t *testing.T) {
	r := runOpen(t, sim.OpenScenario{Rate: 100, ServiceRate: 200, Timeout: time.Second, Duration: 60 * time.Second})
	if r.Total.Arrivals != 6000 || r.Total.Sent != 6000 || r.Total.Goodput != 6000 || r.Total.Wasted != 0 {
		t.Errorf("totals %+v, want 6000 arrivals, attempts and goodput", r.Total)
	}
	if r.Amplification != 1 || r.ArrivalsPerSecond != 100 || r.GoodputPerSecond != 100 || !r.Recovered || r.RecoveryTime != 0 {
		t.Errorf("result %+v", r)
	}
	if len(r.Series) != 60 || r.Series[7].Arrivals != 100 || r.PeakQueue != 0 {
		t.Errorf("series of %d slots, slot 7 %+v, peak queue %d", len(r.Series), r.Series[7], r.PeakQueue)
	}
}

// During an outage the queue grows by the arrivals (one request in
// service, the rest waiting), and drains at ServiceRate − Rate after it.
func TestOpenQueueDuringOutage(t *testing.T) {
	r := runOpen(t, sim.OpenScenario{Rate: 100, ServiceRate: 200, TriggerAt: 10 * time.Second, TriggerFor: 10 * time.Second,
		Duration: 60 * time.Second})
	if q := r.Series[9].Queue; q != 0 {
		t.Errorf("queue before the outage %d, want 0", q)
	}
	if q := r.Series[19].Queue; q != 999 {
		t.Errorf("queue at the end of the outage %d, want 999 (1000 arrivals, one in service)", q)
	}
	// 1000 requests of backlog drain at 100/s: gone 10 s after the outage.
	if q := r.Series[28].Queue; q < 50 {
		t.Errorf("queue 9 s after the outage %d, want over 50", q)
	}
	if q := r.Series[30].Queue; q != 0 {
		t.Errorf("queue 11 s after the outage %d, want 0", q)
	}
	if r.Total.Goodput != r.Total.Served || r.Total.Arrivals != 6000 || r.PeakQueue != 1000 { // with the arrival at 20 s, before the first completion
		t.Errorf("totals %+v, peak queue %d", r.Total, r.PeakQueue)
	}
}

// Partial capacity: at a fraction f the server completes f × ServiceRate.
func TestOpenTriggerFraction(t *testing.T) {
	r := runOpen(t, sim.OpenScenario{Rate: 300, ServiceRate: 200, TriggerAt: 10 * time.Second, TriggerFor: 10 * time.Second,
		TriggerCapacity: 0.25, Duration: 30 * time.Second})
	for k := 11; k < 20; k++ {
		if n := r.Series[k].Served; n != 50 {
			t.Errorf("slot %d served %d, want 50 (0.25 × 200)", k, n)
		}
	}
	if n := r.Series[25].Served; n != 200 {
		t.Errorf("slot 25 served %d, want 200", n)
	}
}

// A client that times out leaves its request in the queue, where the
// server still spends capacity on it; DropExpired drops it instead.
func TestOpenWastedWorkAndDropExpired(t *testing.T) {
	s := sim.OpenScenario{Rate: 100, ServiceRate: 200, Timeout: time.Second, TriggerAt: 10 * time.Second,
		TriggerFor: 10 * time.Second, Duration: 90 * time.Second, Policy: retry.Policy{MaxAttempts: 1}}
	plain := runOpen(t, s)
	s.DropExpired = true
	drop := runOpen(t, s)
	for _, r := range []sim.OpenResult{plain, drop} {
		if r.Total.Goodput+r.Total.Wasted != r.Total.Served || r.Succeeded != r.Total.Goodput || r.Total.Arrivals != 9000 {
			t.Errorf("totals %+v, succeeded %d", r.Total, r.Succeeded)
		}
		if ended := r.Succeeded + r.GaveUp; ended > r.Total.Arrivals || ended < r.Total.Arrivals-100 {
			t.Errorf("%d calls ended of %d", ended, r.Total.Arrivals)
		}
	}
	if plain.Total.Wasted < 1000 {
		t.Errorf("wasted work %d, want over the 1000 requests the outage left", plain.Total.Wasted)
	}
	if drop.Total.Wasted > 1 { // at most the one in service when it expired
		t.Errorf("wasted work with DropExpired %d, want at most 1", drop.Total.Wasted)
	}
	if !plain.Recovered || !drop.Recovered || !(drop.RecoveryTime < plain.RecoveryTime) || plain.RecoveryTime == 0 {
		t.Errorf("recovery: plain %v %v, drop expired %v %v", plain.Recovered, plain.RecoveryTime, drop.Recovered, drop.RecoveryTime)
	}
}

// A full queue rejects at once: during a 10 s outage one request is in
// service, QueueLimit wait, and the other arrivals are rejected, the one
// at 20 s included (the first completion comes 5 ms later).
func TestOpenQueueLimit(t *testing.T) {
	r := runOpen(t, sim.OpenScenario{Rate: 100, ServiceRate: 200, QueueLimit: 50, TriggerAt: 10 * time.Second,
		TriggerFor: 10 * time.Second, Duration: 40 * time.Second, Policy: retry.Policy{MaxAttempts: 1}})
	if r.Total.Rejected != 950 || r.GaveUp != 950 || r.PeakQueue != 50 {
		t.Errorf("rejected %d, gave up %d, peak queue %d; want 950, 950, 50", r.Total.Rejected, r.GaveUp, r.PeakQueue)
	}
}

func TestOpenPoissonArrivals(t *testing.T) {
	s := sim.OpenScenario{Rate: 1000, Arrivals: sim.Poisson, ServiceRate: 2000, Duration: 100 * time.Second, Seed: 1}
	a, b := runOpen(t, s), runOpen(t, s)
	if a.Total != b.Total {
		t.Errorf("same seed, different totals: %+v, %+v", a.Total, b.Total)
	}
	if n := a.Total.Arrivals; math.Abs(float64(n)-1e5) > 4*math.Sqrt(1e5) {
		t.Errorf("%d arrivals in 100 s at 1000/s", n)
	}
	s.Seed = 2
	if c := runOpen(t, s); c.Total.Arrivals == a.Total.Arrivals {
		t.Errorf("seeds 1 and 2 gave the same %d arrivals", a.Total.Arrivals)
	}
	// A spike multiplies the rate for its span.
	s.SpikeAt, s.SpikeFor, s.SpikeFactor = 20*time.Second, 10*time.Second, 3
	sp := runOpen(t, s)
	var in int64
	for _, x := range sp.Series[20:30] {
		in += x.Arrivals
	}
	if math.Abs(float64(in)-3e4) > 4*math.Sqrt(3e4) {
		t.Errorf("%d arrivals during a 10 s spike of 3 × 1000/s", in)
	}
}

// Bronson et al.'s toy: the load settles near 560/s against 300 of
// capacity, and goodput stays near zero to the end of the run.
func TestOpenBronsonStuck(t *testing.T) {
	r := runOpen(t, sim.Bronson())
	if math.Abs(r.OfferedPerSecond-560) > 56 || r.GoodputPerSecond >= 0.05*280 || r.Recovered {
		t.Errorf("offered %.1f/s, goodput %.1f/s, recovered %v: want 560 ± 10 %%, under 14/s, stuck",
			r.OfferedPerSecond, r.GoodputPerSecond, r.Recovered)
	}
	for k := 120; k+10 <= len(r.Series); k += 10 {
		var g int64
		for _, x := range r.Series[k : k+10] {
			g += x.Goodput
		}
		if float64(g) >= 0.05*2800 {
			t.Errorf("goodput %d in the 10 s from %d s, want under 5 %% of 2800", g, k)
		}
	}
}

// huangCase is one of the four published outcomes of Huang et al.
type huangCase struct {
	name      string
	mod       func(*sim.OpenScenario)
	recovered bool
}

var huangCases = []huangCase{
	{"10s at 0.225", func(s *sim.OpenScenario) { s.TriggerCapacity = 0.225 }, true},
	{"10s at 0.20", func(s *sim.OpenScenario) {}, false},
	{"9s at 0.20", func(s *sim.OpenScenario) { s.TriggerFor = 9 * time.Second }, true},
	{"10s at 0.20, 10000/s", func(s *sim.OpenScenario) { s.Rate = 10000 }, true},
}

// The four published outcomes, with evenly spaced arrivals and with
// Poisson arrivals under seeds 1-3, at the calibrated service rate.
func TestOpenHuangOutcomes(t *testing.T) {
	skipFullScale(t)
	for _, c := range huangCases {
		for _, arr := range []struct {
			a    sim.Arrivals
			seed uint64
		}{{sim.Even, 0}, {sim.Poisson, 1}, {sim.Poisson, 2}, {sim.Poisson, 3}} {
			s := sim.Huang()
			c.mod(&s)
			s.Arrivals, s.Seed = arr.a, arr.seed
			r := runOpen(t, s)
			if r.Recovered != c.recovered {
				t.Errorf("%s, %v arrivals, seed %d: recovered %v, published %v (offered %.0f/s, goodput %.0f/s)",
					c.name, arr.a, arr.seed, r.Recovered, c.recovered, r.OfferedPerSecond, r.GoodputPerSecond)
			}
			if !c.recovered && (r.Amplification < 4.9 || r.GoodputPerSecond > 0.05*s.Rate) {
				t.Errorf("%s stuck with amplification %.2f, goodput %.0f/s: want about 5 and near 0", c.name, r.Amplification, r.GoodputPerSecond)
			}
		}
	}
}

// protection is one remedy applied to a stuck scenario.
type protection struct {
	name string
	mod  func(*sim.OpenScenario)
}

var protections = []protection{
	{"budget 0.1", func(s *sim.OpenScenario) { s.Budget = &retry.BudgetConfig{Ratio: 0.1} }},
	{"throttle K=2", func(s *sim.OpenScenario) { s.Throttle = &retry.ThrottleConfig{K: 2} }},
	{"throttle, the SRE book's rule", func(s *sim.OpenScenario) {
		s.Throttle = &retry.ThrottleConfig{K: 2, Window: 2 * time.Minute, MaxProbability: 1, CountRejected: true}
	}},
	{"budget 0.1 + throttle K=2", func(s *sim.OpenScenario) {
		s.Budget = &retry.BudgetConfig{Ratio: 0.1}
		s.Throttle = &retry.ThrottleConfig{K: 2}
	}},
	{"backoff", func(s *sim.OpenScenario) { s.Policy = retry.Policy{MaxAttempts: 5} }},
	{"at most 2 retries", func(s *sim.OpenScenario) { s.Policy.MaxAttempts = 3 }},
	{"drop expired", func(s *sim.OpenScenario) { s.DropExpired = true }},
	{"budget 0.1 + drop expired", func(s *sim.OpenScenario) { s.Budget = &retry.BudgetConfig{Ratio: 0.1}; s.DropExpired = true }},
	{"no retries", func(s *sim.OpenScenario) { s.Policy.MaxAttempts = 1 }},
}

// What each remedy does to the two stuck runs, as the model computes it
// (the README's table). Bronson's toy has 7 % headroom: a budget of 10 %
// keeps the load above capacity (280 + 28 + the floor > 300), and so does
// anything that still retries every timed-out request. The Throttle with
// its defaults recovers, alone or with a budget; with the SRE book's rule
// as written (2-minute window, rejections counted, no cap) it locks the
// clients out: in the stuck state nothing is accepted, every locally
// rejected attempt counts as a request too, and the share let through
// only doubles per window.
func TestOpenProtections(t *testing.T) {
	want := map[string][2]bool{ // recovered: bronson, huang
		"budget 0.1":                    {false, true},
		"throttle K=2":                  {true, true},
		"throttle, the SRE book's rule": {false, false},
		"budget 0.1 + throttle K=2":     {true, true},
		"backoff":                       {false, true},
		"at most 2 retries":             {false, false},
		"drop expired":                  {false, true},
		"budget 0.1 + drop expired":     {true, true},
		"no retries":                    {true, true},
	}
	for i, base := range []sim.OpenScenario{sim.Bronson(), sim.Huang()} {
		if i == 1 && raceEnabled {
			continue
		}
		for _, p := range protections {
			s := base
			p.mod(&s)
			r := runOpen(t, s)
			if r.Recovered != want[p.name][i] {
				t.Errorf("%s with %s: recovered %v (in %v), want %v; offered %.0f/s, goodput %.0f/s",
					[]string{"bronson", "huang"}[i], p.name, r.Recovered, r.RecoveryTime, want[p.name][i], r.OfferedPerSecond, r.GoodputPerSecond)
			}
			if p.name == "throttle, the SRE book's rule" && i == 0 && r.OfferedPerSecond > 0.01*s.Rate {
				t.Errorf("%s: the locked-out throttle sends %.0f/s, want under 1 %% of the arrivals", p.name, r.OfferedPerSecond)
			}
		}
	}
}

// The AWS SDK's standard mode (3 attempts, full jitter from 50 ms, its
// retry quota as the SDK keeps it) gets the Huang run out. In Bronson's
// toy the quota runs dry after 500/14 retries and, refilled only by
// successes, stays dry: the run recovers as with no retries at all.
func TestOpenAWSStandard(t *testing.T) {
	q := sim.AWSRetryQuota()
	aws := func(s sim.OpenScenario) sim.OpenScenario {
		s.Policy, s.Quota = retry.AWSStandardPolicy(), &q
		return s
	}
	noRetry := sim.Bronson()
	noRetry.Policy.MaxAttempts = 1
	b, n := runOpen(t, aws(sim.Bronson())), runOpen(t, noRetry)
	if !b.Recovered || b.BudgetRefused == 0 || b.RecoveryTime < n.RecoveryTime-10*time.Second || b.RecoveryTime > n.RecoveryTime+10*time.Second {
		t.Errorf("bronson: recovered %v after %v (%d refused by the quota); no retries: after %v", b.Recovered, b.RecoveryTime,
			b.BudgetRefused, n.RecoveryTime)
	}
	// The windowed Budget that approximates the quota refills as retries
	// age out, and keeps Bronson's toy stuck.
	s := sim.Bronson()
	s.Policy = retry.AWSStandardPolicy()
	c := account.BudgetConfig(retry.AWSBudget())
	s.Budget = &c
	if r := runOpen(t, s); r.Recovered {
		t.Errorf("bronson with the windowed approximation: recovered after %v", r.RecoveryTime)
	}
	if raceEnabled {
		return
	}
	if r := runOpen(t, aws(sim.Huang())); !r.Recovered {
		t.Errorf("huang: AWS standard mode stuck, offered %.0f/s", r.OfferedPerSecond)
	}
	if err := (sim.OpenScenario{Rate: 1, ServiceRate: 1, Duration: time.Minute, Quota: &sim.RetryQuota{}}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "want a positive Capacity") {
		t.Errorf("zero quota: %v", err)
	}
}

// A fleet of 100 processes on Bronson's toy with a budget under its
// headroom (ratio 0.01): one shared budget gets it out, while the 100
// local floors of 1 retry/s add 100 retries/s and keep it stuck.
func TestOpenFleetFloors(t *testing.T) {
	s := sim.Bronson()
	s.Budget = &retry.BudgetConfig{Ratio: 0.01}
	s.Processes = 100
	local := runOpen(t, s)
	s.SharedBudget = true
	shared := runOpen(t, s)
	if local.Recovered || !shared.Recovered || local.OfferedPerSecond < 350 || local.Budget != "local" || shared.Budget != "shared" {
		t.Errorf("local: recovered %v, offered %.0f/s; shared: recovered %v in %v",
			local.Recovered, local.OfferedPerSecond, shared.Recovered, shared.RecoveryTime)
	}
}

// The run's memory is bounded by what is in flight: the stuck Huang run's
// server queue reaches ten million requests, which it holds as a count.
func TestOpenMemoryBoundedByInFlight(t *testing.T) {
	skipFullScale(t)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := runOpen(t, sim.Huang())
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	if r.PeakQueue < 5e6 || alloc > 64<<20 || r.PeakInFlight > 250000 {
		t.Errorf("peak queue %d, in flight %d, %d MiB allocated: want over 5e6 queued in under 64 MiB",
			r.PeakQueue, r.PeakInFlight, alloc>>20)
	}
}

func TestOpenValidate(t *testing.T) {
	ok := sim.OpenScenario{Rate: 10, ServiceRate: 20, Duration: time.Minute}
	b, _ := retry.NewBudget(retry.BudgetConfig{})
	for _, c := range []struct {
		name string
		mod  func(*sim.OpenScenario)
		want string
	}{
		{"zero", func(s *sim.OpenScenario) { *s = sim.OpenScenario{} }, "Rate 0"},
		{"negative rate", func(s *sim.OpenScenario) { s.Rate = -1 }, "Rate -1"},
		{"NaN rate", func(s *sim.OpenScenario) { s.Rate = math.NaN() }, "Rate NaN"},
		{"service rate", func(s *sim.OpenScenario) { s.ServiceRate = 0 }, "ServiceRate 0"},
		{"fraction", func(s *sim.OpenScenario) { s.TriggerCapacity = 1.5 }, "TriggerCapacity 1.5 is not a fraction"},
		{"negative fraction", func(s *sim.OpenScenario) { s.TriggerCapacity = -0.1 }, "TriggerCapacity -0.1"},
		{"spike", func(s *sim.OpenScenario) { s.SpikeFactor = -2 }, "SpikeFactor -2"},
		{"duration", func(s *sim.OpenScenario) { s.Duration = 0 }, "Duration 0s must be positive"},
		{"timeout", func(s *sim.OpenScenario) { s.Timeout = -time.Second }, "Timeout -1s is negative"},
		{"queue", func(s *sim.OpenScenario) { s.QueueLimit = -1 }, "QueueLimit -1"},
		{"slot", func(s *sim.OpenScenario) { s.Slot = 2 * time.Minute }, "Slot 2m0s is longer"},
		{"slots", func(s *sim.OpenScenario) { s.Slot = time.Microsecond }, "over MaxLoadSlots"},
		{"policy budget", func(s *sim.OpenScenario) { s.Policy.Budget = b }, "Policy.Budget counts real time"},
		{"shared", func(s *sim.OpenScenario) { s.SharedThrottle = true }, "SharedThrottle needs a Throttle"},
		{"budget", func(s *sim.OpenScenario) { s.Budget = &retry.BudgetConfig{Window: time.Microsecond} }, "Budget.Window"},
		{"throttle", func(s *sim.OpenScenario) { s.Throttle = &retry.ThrottleConfig{K: 0.5} }, "Throttle.K"},
		{"accepted", func(s *sim.OpenScenario) {
			s.Throttle = &retry.ThrottleConfig{Accepted: func(error) bool { return true }}
		}, "Accepted is not modelled"},
		{"throttle observer", func(s *sim.OpenScenario) {
			s.Throttle = &retry.ThrottleConfig{Observer: retry.ObserverFunc(func(context.Context, retry.Event) {})}
		}, "Throttle.Observer is not modelled"},
		{"forever", func(s *sim.OpenScenario) {
			s.QueueLimit, s.Policy = 5, retry.Policy{Initial: retry.Immediate, MaxAttempts: retry.Unlimited}
		}, "never ends"},
	} {
		s := ok
		c.mod(&s)
		err := s.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "sim: ") {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if _, rerr := sim.RunOpen(context.Background(), s); rerr == nil || rerr.Error() != err.Error() {
			t.Errorf("%s: RunOpen %v, Validate %v", c.name, rerr, err)
		}
		if !errors.Is(err, sim.ErrScenario) && !errors.Is(err, retry.ErrInvalidPolicy) {
			t.Errorf("%s: %v wraps neither ErrScenario nor ErrInvalidPolicy", c.name, err)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid scenario: %v", err)
	}
}

func TestOpenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sim.RunOpen(ctx, sim.Bronson()); !errors.Is(err, context.Canceled) {
		t.Errorf("RunOpen with a cancelled context: %v", err)
	}
}

func TestNamedOpenScenario(t *testing.T) {
	for _, n := range sim.OpenScenarioNames() {
		if _, err := sim.NamedOpenScenario(n); err != nil {
			t.Error(err)
		}
	}
	if _, err := sim.NamedOpenScenario("nope"); err == nil || !strings.Contains(err.Error(), `unknown scenario "nope"`) {
		t.Errorf("unknown scenario: %v", err)
	}
}

// Recovery needs RecoveryTail of run left after its point: the same
// healthy end, cut 30 s after the trigger, does not count.
func TestOpenRecoveryNeedsTail(t *testing.T) {
	s := sim.OpenScenario{Rate: 100, ServiceRate: 200, Timeout: time.Second, TriggerAt: 10 * time.Second,
		TriggerFor: 10 * time.Second, Duration: 90 * time.Second, Policy: retry.Policy{MaxAttempts: 1}}
	long := runOpen(t, s)
	s.Duration = 20*time.Second + sim.RecoveryTail + long.RecoveryTime - time.Second
	short := runOpen(t, s)
	if !long.Recovered || short.Recovered || long.TriggerEnd != 20*time.Second {
		t.Errorf("90 s run: recovered %v after %v; cut %v: recovered %v", long.Recovered, long.RecoveryTime, s.Duration, short.Recovered)
	}
	s.Duration += time.Second
	if r := runOpen(t, s); !r.Recovered || r.RecoveryTime != long.RecoveryTime {
		t.Errorf("run of %v: recovered %v after %v, want after %v", s.Duration, r.Recovered, r.RecoveryTime, long.RecoveryTime)
	}
}

// A call that resends at one instant, rejected each time by the
// throttle (the backend accepts nothing), still lets its context end the
// run: the rejections are made one by one, with random draws, up to
// MaxAttempts.
func TestOpenCancelledInsideACall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	s := sim.OpenScenario{Rate: 1, ServiceRate: 1, Timeout: time.Millisecond, TriggerFor: time.Hour, Duration: time.Hour,
		Throttle: &retry.ThrottleConfig{K: 1, Window: time.Hour}, MaxWork: -1,
		Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: math.MaxInt32}}
	start := time.Now()
	if _, err := sim.RunOpen(ctx, s); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("RunOpen: %v after %v, want context.DeadlineExceeded soon after 200ms", err, time.Since(start))
	}
}

// Immediate resends into a full queue fail at one instant: the run counts
// them without making each one (2^31 attempts per call here).
func TestOpenFullQueueResendsCounted(t *testing.T) {
	s := sim.OpenScenario{Rate: 1, ServiceRate: 1, QueueLimit: 1, TriggerFor: time.Hour, Duration: 10 * time.Second,
		Policy: retry.Policy{Initial: retry.Immediate, MaxAttempts: math.MaxInt32}}
	start := time.Now()
	r := runOpen(t, s)
	// Calls at 0 s (in service) and 1 s (queued); the other 8 send all
	// their attempts into the full queue.
	if r.GaveUp != 8 || r.Total.Rejected != 8*math.MaxInt32 || r.Total.Sent != 2+8*math.MaxInt32 || time.Since(start) > 5*time.Second {
		t.Errorf("gave up %d, rejected %d, sent %d, in %v", r.GaveUp, r.Total.Rejected, r.Total.Sent, time.Since(start))
	}
}

// Common random numbers: the arrivals draw on a stream of their own, so
// every strategy run with one Seed sees the same calls at the same times,
// whatever the jitter and throttle draws (the issue's --compare saw
// 4,000,060 arrivals against 3,999,911).
func TestOpenCommonArrivals(t *testing.T) {
	base := sim.OpenScenario{Rate: 1000, Arrivals: sim.Poisson, ServiceRate: 900, Timeout: 100 * time.Millisecond,
		TriggerAt: 10 * time.Second, TriggerFor: 5 * time.Second, Duration: 60 * time.Second, Seed: 7,
		Policy: retry.Policy{Initial: 10 * time.Millisecond, MaxAttempts: 4}}
	var ref sim.OpenResult
	for i, mod := range []func(*sim.OpenScenario){
		func(*sim.OpenScenario) {},
		func(s *sim.OpenScenario) { s.Policy.Jitter = retry.FullJitter() },
		func(s *sim.OpenScenario) { s.Throttle = &retry.ThrottleConfig{K: 2} },
		func(s *sim.OpenScenario) { s.Policy.MaxAttempts = 1 },
	} {
		s := base
		mod(&s)
		r := runOpen(t, s)
		if i == 0 {
			ref = r
			continue
		}
		if r.Total.Sent == ref.Total.Sent {
			t.Errorf("strategy %d sent as many attempts (%d) as the first: the strategies do not differ", i, r.Total.Sent)
		}
		for k := range r.Series {
			if r.Series[k].Arrivals != ref.Series[k].Arrivals {
				t.Fatalf("strategy %d: slot %d has %d arrivals, the first strategy %d", i, k, r.Series[k].Arrivals, ref.Series[k].Arrivals)
			}
		}
	}
}

// The runs of the issue that never ended are refused before they start,
// by their work estimate; each refusal takes no time.
func TestOpenWorkRefused(t *testing.T) {
	unlimited := retry.Policy{Initial: retry.Immediate, MaxAttempts: retry.Unlimited}
	for _, c := range []struct {
		name string
		s    sim.OpenScenario
	}{
		{"50ns timeout", sim.OpenScenario{Rate: 162, ServiceRate: 27, Timeout: 50, Duration: time.Second,
			Slot: 100 * time.Millisecond, Policy: unlimited}},
		{"1us timeout", sim.OpenScenario{Rate: 100, ServiceRate: 50, Timeout: time.Microsecond, Duration: time.Minute,
			Policy: unlimited}},
		{"1ns waits into a full queue", sim.OpenScenario{Rate: 10, ServiceRate: 1, Duration: time.Second,
			Slot: 100 * time.Millisecond, QueueLimit: 1,
			Policy: retry.Policy{Initial: 1, MaxDelay: 1, Jitter: retry.NoJitter(), MaxAttempts: retry.Unlimited}}},
		{"1e12 calls", sim.OpenScenario{Rate: 1e7, ServiceRate: 1e7, Duration: 100000 * time.Second}},
	} {
		start := time.Now()
		_, err := sim.RunOpen(context.Background(), c.s)
		if !errors.Is(err, sim.ErrScenario) || !strings.Contains(err.Error(), "over MaxWork") || time.Since(start) > time.Second {
			t.Errorf("%s: %v after %v, want a refusal over MaxWork at once", c.name, err, time.Since(start))
		}
		if w := c.s.Work(); !(w > sim.DefaultMaxWork) {
			t.Errorf("%s: Work %.3g, want over %.0e", c.name, w, sim.DefaultMaxWork)
		}
	}
	// The estimate bounds what a run makes: a call that times out every
	// 100 ms with no waits makes 10 attempts a second to the end of the
	// run; the estimate gives every call the whole run, twice what the
	// average call, arriving half way, has.
	s := sim.OpenScenario{Rate: 10, ServiceRate: 1, Timeout: 100 * time.Millisecond, TriggerFor: time.Hour,
		Duration: 10 * time.Second, Policy: unlimited}
	r := runOpen(t, s)
	if w := s.Work(); w < float64(r.Total.Sent) || w > 2.1*float64(r.Total.Sent) {
		t.Errorf("Work %.0f, attempts made %d", w, r.Total.Sent)
	}
	// A limit of the caller's own
	// is refused by the estimate.
	s.MaxWork = float64(r.Total.Sent) / 2
	if _, err := sim.RunOpen(context.Background(), s); err == nil || !strings.Contains(err.Error(), "over MaxWork (2.52e+03)") {
		t.Errorf("MaxWork half the run: %v", err)
	}
}

// A run that leaves too little time after the trigger, or whose trigger
// lies beyond its end, cannot tell recovered from stuck.
func TestOpenCannotTell(t *testing.T) {
	short := runOpen(t, sim.OpenScenario{Rate: 100, ServiceRate: 1000, Duration: 29 * time.Second})
	s := sim.Bronson()
	s.TriggerAt = 1000 * time.Hour
	late := runOpen(t, s)
	for _, r := range []sim.OpenResult{short, late} {
		if !r.CannotTell || r.Recovered {
			t.Errorf("cannot tell %v, recovered %v, want cannot tell", r.CannotTell, r.Recovered)
		}
	}
	if r := runOpen(t, sim.OpenScenario{Rate: 100, ServiceRate: 1000, Duration: 30 * time.Second}); r.CannotTell || !r.Recovered {
		t.Errorf("30 s run: cannot tell %v, recovered %v, want recovered", r.CannotTell, r.Recovered)
	}
}

// An overload whose queue keeps growing is not recovered, even with no
// timeout, where every completion counts as goodput.
func TestOpenGrowingQueueNotRecovered(t *testing.T) {
	for _, timeout := range []time.Duration{0, time.Hour} {
		r := runOpen(t, sim.OpenScenario{Rate: 100, ServiceRate: 96, Timeout: timeout, Duration: 600 * time.Second})
		if r.Recovered || r.CannotTell || r.Total.Queue < 2000 {
			t.Errorf("timeout %v: recovered %v, cannot tell %v, queue at the end %d", timeout, r.Recovered, r.CannotTell, r.Total.Queue)
		}
	}
	if r := runOpen(t, sim.OpenScenario{Rate: 96, ServiceRate: 100, Duration: 600 * time.Second}); !r.Recovered {
		t.Errorf("96 calls/s against 100: not recovered")
	}
}

// Rates the model's nanosecond clock cannot represent are refused.
func TestOpenRateLimits(t *testing.T) {
	for _, s := range []sim.OpenScenario{
		{Rate: 2e9, ServiceRate: 3e9, Duration: time.Second},
		{Rate: 1, ServiceRate: 3e9, Duration: time.Second},
		{Rate: 5e8, SpikeFactor: 3, SpikeFor: time.Second, ServiceRate: 1e9, Duration: time.Second},
	} {
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "one request per nanosecond") && !strings.Contains(err.Error(), "one call per nanosecond") {
			t.Errorf("rate %v, service rate %v: %v", s.Rate, s.ServiceRate, err)
		}
	}
}

// MaxMemory bounds the open model: a backlog that must pile up past it
// is refused up front, and one that grows past it ends the run.
func TestOpenMaxMemory(t *testing.T) {
	s := sim.OpenScenario{Rate: 1e6, ServiceRate: 1, Duration: 30 * time.Second, MaxMemory: 64 << 20}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "over MaxMemory 64.0 MiB") {
		t.Errorf("no timeout: %v", err)
	}
	s.Timeout = 10 * time.Second
	start := time.Now()
	_, err := sim.RunOpen(context.Background(), s)
	if !errors.Is(err, sim.ErrScenario) || !strings.Contains(err.Error(), "over MaxMemory 64.0 MiB") || time.Since(start) > 5*time.Second {
		t.Errorf("10 s timeout: %v after %v", err, time.Since(start))
	}
}

// The Throttle with its defaults has no stuck cell over the default grid
// of the Huang phase diagram (docs/simulator.md: trigger-capacity 0.1 to
// 0.45 by 0.05, trigger-for 2 s to 20 s by 3 s), where plain resends are
// stuck from 8 s with 15 % left.
func TestOpenThrottlePhaseNoStuckCell(t *testing.T) {
	skipFullScale(t)
	if raceEnabled {
		t.Skip("56 full-scale runs: without -race only")
	}
	for c := 10; c <= 45; c += 5 {
		for d := 2; d <= 20; d += 3 {
			s := sim.Huang()
			s.TriggerCapacity, s.TriggerFor = float64(c)/100, time.Duration(d)*time.Second
			s.Throttle = &retry.ThrottleConfig{}
			if r := runOpen(t, s); !r.Recovered {
				t.Errorf("throttle at %d %% for %d s: stuck, offered %.0f/s, goodput %.0f/s", c, d, r.OfferedPerSecond, r.GoodputPerSecond)
			}
		}
	}
}
