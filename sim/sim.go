package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrykit/retry"
)

// Model selects what the simulated clients compete for.
type Model uint8

const (
	// Capacity (the zero Model) is a server that accepts at most
	// Scenario.Capacity requests per time slot; see the package doc.
	Capacity Model = iota
	// Contention is the optimistic-concurrency study behind "Exponential
	// Backoff And Jitter": one row with a version; see the package doc.
	Contention
)

// String returns "capacity" or "contention".
func (m Model) String() string {
	switch m {
	case Capacity:
		return "capacity"
	case Contention:
		return "contention"
	}
	return fmt.Sprintf("Model(%d)", uint8(m))
}

// ParseModel returns the Model named s ("capacity" or "contention").
func ParseModel(s string) (Model, error) {
	switch s {
	case "capacity":
		return Capacity, nil
	case "contention":
		return Contention, nil
	}
	return 0, fmt.Errorf("sim: unknown model %q (want capacity or contention)", s)
}

// Defaults used where a Scenario field is zero.
const (
	DefaultCapacity  = 100                    // requests accepted per slot
	DefaultSlot      = 100 * time.Millisecond // slot width: 100 per 100 ms is 1,000 requests/s
	DefaultLatency   = 10 * time.Millisecond  // mean one-way message delay (contention)
	DefaultLatencySD = 2 * time.Millisecond   // its standard deviation (contention)
	DefaultTrials    = 1                      // independent runs averaged
	DefaultMaxMemory = 4 << 30                // bytes a run may need (4 GiB), for a zero Scenario.MaxMemory
)

// Scenario describes one simulation. The zero value of every field except
// Clients means its default; Clients must be positive. A Scenario is a
// plain value and may be reused.
type Scenario struct {
	// Model is Capacity (zero) or Contention.
	Model Model

	// Clients is how many clients each need one success. Required (> 0).
	Clients int

	// Capacity is the number of requests the server accepts per Slot
	// (capacity model). Zero means DefaultCapacity; negative is an error.
	Capacity int

	// Slot is the width of one capacity slot and of one entry of
	// Result.Load, in both models. Zero means DefaultSlot.
	Slot time.Duration

	// Outage makes the server fail every request that arrives before this
	// time (capacity model). Zero means no outage.
	Outage time.Duration

	// StartWindow spreads the clients' first requests uniformly over
	// [0, StartWindow). Zero means all start at time 0 (a herd).
	StartWindow time.Duration

	// RetryAfter, if positive, is carried by every failed response of the
	// capacity model (over capacity or during the outage); a client then
	// waits max(policy delay, RetryAfter), as retry.Do does for
	// retry.ServerWait. Zero means no hint.
	RetryAfter time.Duration

	// Latency and LatencySD are the mean and standard deviation of the
	// one-way message delay |Normal(Latency, LatencySD)| of the contention
	// model. Zero means DefaultLatency and DefaultLatencySD; negative is
	// an error (a LatencySD of 1ns is as good as a fixed delay).
	Latency, LatencySD time.Duration

	// Trials is how many independent runs are averaged. Zero means 1.
	Trials int

	// Seed selects the random streams: trial k uses
	// rand.New(rand.NewPCG(Seed, k)). The same Scenario gives the same
	// Result.
	Seed uint64

	// Policy is what every client follows: its Delay method gives each
	// wait, MaxAttempts and MaxElapsed decide when a client gives up.
	// AttemptTimeout, Retryable, hooks and loggers do not apply (every
	// failure here is retryable and instantaneous). Policy.Budget and
	// Policy.Throttle are rejected: a *retry.Budget counts in real time,
	// so give the simulated budget as Scenario.Budget instead. The
	// Throttle is not modelled. MaxAttempts above math.MaxInt32 count as
	// math.MaxInt32.
	Policy retry.Policy

	// Processes splits the clients into a fleet of processes: client i
	// belongs to process i mod Processes. It matters only with a Budget.
	// Zero means 1; it must not exceed Clients.
	Processes int

	// Budget, if not nil, gives the clients a retry budget that works as
	// retry.Budget does, in virtual time: a retry is granted while
	//	Ratio × first attempts + MinPerSecond × Window − retries ≥ 1
	// over the window, counted in 10 slots of Window/10; a client refused a
	// retry gives up, as retry.Do does with ReasonBudget. Zero fields mean
	// retry's defaults (0.1, 1 per second, 10 s);
	// invalid ones are rejected as retry.NewBudget rejects them. Each process has a budget of its own unless
	// SharedBudget is set. Nil means no budget.
	Budget *retry.BudgetConfig

	// SharedBudget makes every process draw on one Budget shared by the
	// whole fleet instead of one Budget per process.
	SharedBudget bool

	// MaxMemory is the most memory Run may need, in bytes: a Scenario
	// whose estimate (see Run) is larger is refused before it starts.
	// Zero means DefaultMaxMemory; negative means no limit.
	MaxMemory int64

	// Progress, if not nil, is called from Run's goroutine now and then
	// with the number of client runs finished (succeeded or gave up) out
	// of Clients*Trials. It must be quick.
	Progress func(done, total int64)
}

// Result is what a Scenario produced. Counts and times are means over the
// trials.
type Result struct {
	Clients, Trials int

	// Requests is the mean number of calls per trial: requests sent in the
	// capacity model, writes in the contention model (reads are not
	// counted, as in the study).
	Requests float64

	// Succeeded and GaveUp are the mean numbers of clients per trial that
	// succeeded and that gave up (stopped by MaxAttempts, MaxElapsed or the
	// budget).
	Succeeded, GaveUp float64

	// RequestsPerSuccess is Requests / Succeeded (+Inf when none succeeded).
	RequestsPerSuccess float64

	// CompletionP50, CompletionP99 and CompletionMax are percentiles of
	// the times (from time 0) at which clients succeeded, taken per trial
	// over the clients that succeeded and averaged over the trials in
	// which at least one client succeeded (a trial in which none did has
	// no completion time and does not count). CompletionMax is when the
	// last client succeeded. Zero when no client succeeded in any trial.
	CompletionP50, CompletionP99, CompletionMax time.Duration

	// PeakLoad is the mean over trials of the largest number of requests
	// (capacity model) or writes (contention) arriving in one Slot.
	PeakLoad float64

	// Capacity is the capacity per slot the run used (0 for contention).
	Capacity int

	// Slot is the slot width the run used.
	Slot time.Duration

	// Load is the number of requests (writes) arriving in each Slot, of
	// trial 0 only: an exact series whose waves are not smoothed away by
	// averaging runs with different phases. Load[i] covers
	// [i*Slot, (i+1)*Slot); it ends at the last slot with a call and is
	// cut at MaxLoadSlots slots (calls later still count everywhere else,
	// PeakLoad included).
	Load []int

	// LoadCut reports that trial 0 had calls past MaxLoadSlots slots,
	// which Load leaves out. False when Load holds every call.
	LoadCut bool

	// Processes is the number of processes the clients were split into,
	// and Budget "local" (one budget per process), "shared" (one for the
	// fleet) or "" (none).
	Processes int
	Budget    string

	// BudgetRefused is the mean number of clients per trial that gave up
	// because the budget refused a retry (they also count in GaveUp).
	BudgetRefused float64
}

// ErrScenario is wrapped by every error about an invalid Scenario.
var ErrScenario = errors.New("sim: invalid scenario")

// MaxDuration bounds every duration of a Scenario (and the policy's Initial
// and MaxDelay), so that simulated clocks cannot overflow.
const MaxDuration = 1000 * time.Hour

// MaxLoadSlots is the length at which Result.Load is cut (2^20 slots):
// calls in later slots are not in the series but count in every other
// figure of the Result, PeakLoad included. It also bounds the memory the
// series takes (see Run).
const MaxLoadSlots = 1 << 20

// MaxTime is the end of virtual time. A run in which a client still has a
// request to send at or after MaxTime (about 146 years) stops with an error
// wrapping ErrScenario: its clients would never all finish.
const MaxTime = time.Duration(1 << 62)

func (s *Scenario) resolve() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrScenario}, a...)...)
	}
	switch {
	case s.Clients <= 0:
		return bad("Clients %d must be positive", s.Clients)
	case s.Clients > math.MaxInt32:
		return bad("Clients %d is over %d", s.Clients, math.MaxInt32)
	case s.Model > Contention:
		return bad("unknown Model %d", s.Model)
	case s.Capacity < 0:
		return bad("Capacity %d is negative", s.Capacity)
	case s.Trials < 0:
		return bad("Trials %d is negative", s.Trials)
	case s.Policy.Budget != nil:
		return bad("Policy.Budget counts real time: give the simulated budget as Scenario.Budget")
	case s.Policy.Throttle != nil:
		return bad("Policy.Throttle is not modelled")
	case s.Processes < 0:
		return bad("Processes %d is negative", s.Processes)
	case s.Processes > s.Clients:
		return bad("Processes %d is over Clients %d", s.Processes, s.Clients)
	case s.SharedBudget && s.Budget == nil:
		return bad("SharedBudget needs a Budget")
	}
	if s.Budget != nil {
		if _, err := retry.NewBudget(*s.Budget); err != nil {
			return bad("Budget.%s", strings.TrimPrefix(err.Error(), "retry: BudgetConfig."))
		}
	}
	for _, d := range []struct {
		name     string
		v        time.Duration
		isPolicy bool // negative values are the policy's to judge (retry.Immediate)
	}{{"Slot", s.Slot, false}, {"Outage", s.Outage, false}, {"StartWindow", s.StartWindow, false},
		{"RetryAfter", s.RetryAfter, false}, {"Latency", s.Latency, false}, {"LatencySD", s.LatencySD, false},
		{"Policy.Initial", s.Policy.Initial, true}, {"Policy.MaxDelay", s.Policy.MaxDelay, true}} {
		switch {
		case d.v < 0 && !d.isPolicy:
			return bad("%s %v is negative", d.name, d.v)
		case d.v > MaxDuration:
			return bad("%s %v is over MaxDuration (%v)", d.name, d.v, MaxDuration)
		}
	}
	if err := s.Policy.Validate(); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	if s.Model == Capacity && s.Policy.Initial == retry.Immediate && s.Policy.MaxAttempts == retry.Unlimited &&
		s.RetryAfter == 0 {
		// A refused client would retry at the same instant forever: requests
		// take no virtual time here, so not even MaxElapsed could end it.
		return bad("Policy.Initial retry.Immediate (no waits) with Policy.MaxAttempts retry.Unlimited never ends: " +
			"requests take no time in the capacity model, so a refused client retries forever at one instant " +
			"(MaxElapsed cannot stop it, nor can a budget be relied on to); limit MaxAttempts or set RetryAfter")
	}
	if s.Capacity == 0 {
		s.Capacity = DefaultCapacity
	}
	if s.Slot == 0 {
		s.Slot = DefaultSlot
	}
	if s.Latency == 0 {
		s.Latency = DefaultLatency
	}
	if s.LatencySD == 0 {
		s.LatencySD = DefaultLatencySD
	}
	if s.Trials == 0 {
		s.Trials = DefaultTrials
	}
	if s.Processes == 0 {
		s.Processes = 1
	}
	if s.MaxMemory == 0 {
		s.MaxMemory = DefaultMaxMemory
	}
	if n := float64(s.Clients) * float64(s.Trials); n > MaxRequests {
		return bad("%d clients in %s would send at least %.3g requests, over MaxRequests (%.0e)",
			s.Clients, trials(s.Trials), n, MaxRequests)
	}
	// A budget that can grant only so many retries over the whole run
	// bounds its work by itself (see budgetGrants); otherwise the clients
	// are held to what they would send without one.
	if s.Model == Capacity && (s.Budget == nil || (float64(s.Clients)+s.budgetGrants())*float64(s.Trials) > MaxRequests) {
		if n := s.minRequests() * float64(s.Trials); n > MaxRequests {
			// With a budget this is what the clients could send, if it
			// granted what it may: not a certainty, but too much to run.
			would, budget := "would send at least", ""
			if s.Budget != nil {
				would = "could send"
				budget = fmt.Sprintf(" (the retry budget could grant %.3g retries per trial, too many to rely on it to stop them)", s.budgetGrants())
			}
			if s.maxWait() <= 0 {
				return bad("the clients "+would+" %.3g requests in %s while the server cannot take them "+
					"(the Outage, or Capacity per Slot), over MaxRequests (%.0e)%s: with Policy.Initial retry.Immediate (no waits) "+
					"and a retry budget each refused client sends all its attempts at one instant, one by one; "+
					"limit MaxAttempts or set RetryAfter", n, trials(s.Trials), MaxRequests, budget)
			}
			return bad("the clients "+would+" %.3g requests in %s while the server cannot take them "+
				"(the Outage, or Capacity per Slot), over MaxRequests (%.0e)%s: waits of at most Policy.MaxDelay %v are "+
				"too short; lengthen them or limit Policy.MaxAttempts or MaxElapsed", n, trials(s.Trials), MaxRequests, budget, s.maxWait())
		}
	}
	if need := s.memory(); s.MaxMemory > 0 && need > s.MaxMemory {
		return bad("needs about %s for %d clients, over MaxMemory %s", byteSize(need), s.Clients, byteSize(s.MaxMemory))
	}
	return nil
}

// Validate reports whether Run would accept s: it makes exactly the checks
// Run makes before it starts, and returns the same error. They are, on a
// copy of s with its zero fields replaced by their defaults: every field
// is in range (Clients positive and at most math.MaxInt32; Capacity,
// Trials, Processes and the durations not negative; the durations and the
// Policy's Initial and MaxDelay at most MaxDuration; Processes at most
// Clients; a known Model), the Policy is valid (retry.Policy.Validate)
// and has no Budget or Throttle, the Budget is valid as retry.NewBudget
// judges it and SharedBudget comes with one; capacity-model zero waits
// (Policy.Initial retry.Immediate, no RetryAfter) with unlimited attempts
// are refused, since they never end; Clients × Trials, and in the capacity
// model the requests the clients would surely send while the server cannot
// take them (with a retry budget that could grant more than MaxRequests,
// could send), are at most MaxRequests; and the memory estimate (see Run) is
// within MaxMemory. The errors wrap ErrScenario, or retry.ErrInvalidPolicy
// for a bad Policy. A nil error does not promise that Run succeeds: a run
// can still reach MaxTime, pass MaxRequests while it runs, or see ctx
// end. It does not call Progress. The zero Scenario is refused: Clients
// is required.
func (s Scenario) Validate() error { return s.resolve() }

// trials is "1 trial" or "n trials", for messages.
func trials(n int) string {
	if n == 1 {
		return "1 trial"
	}
	return strconv.Itoa(n) + " trials"
}

// Run simulates s and returns its Result. It is deterministic: the same
// Scenario gives the same Result. It returns the error Validate returns for
// a Scenario it refuses up front (a bad Scenario, one that needs more than
// MaxMemory, checked before anything is allocated, or surely, or with a
// budget possibly, more than MaxRequests requests), an error wrapping ErrScenario for a run whose
// clients are still waiting at MaxTime or that has processed more than
// MaxRequests requests, and ctx's error if ctx ends first (checked every
// few thousand events, however they are split into trials). It validates
// s before it looks at ctx.
//
// Memory: about 32 bytes per client in the capacity model (36 in the
// contention model), plus 8 bytes per client that succeeds, plus up to one
// chunk of 4 to 256 events (32 bytes each) per slot with pending events,
// plus 16 bytes per slot of Load (at most MaxLoadSlots), plus a few MiB.
func Run(ctx context.Context, s Scenario) (Result, error) {
	return simulate(ctx, s, MaxRequests)
}

// simulate is Run with maxWork in place of MaxRequests as the bound on
// the requests the run may process (tests lower it).
func simulate(ctx context.Context, s Scenario, maxWork float64) (Result, error) {
	if err := s.resolve(); err != nil {
		return Result{}, err
	}
	st := newState(&s)
	st.ctx, st.maxWork = ctx, maxWork
	res := Result{Clients: s.Clients, Trials: s.Trials, Slot: s.Slot, Processes: s.Processes}
	switch {
	case s.Budget != nil && s.SharedBudget:
		res.Budget = "shared"
	case s.Budget != nil:
		res.Budget = "local"
	}
	if s.Model == Capacity {
		res.Capacity = s.Capacity
	}
	var (
		p50, p99, pmax float64
		withSuccess    int // trials in which a client succeeded
	)
	for k := 0; k < s.Trials; k++ {
		t, err := st.trial(uint64(k))
		if err != nil {
			return Result{}, err
		}
		res.Requests += float64(t.requests)
		res.Succeeded += float64(t.succeeded)
		res.GaveUp += float64(t.gaveUp)
		res.PeakLoad += float64(t.peak)
		res.BudgetRefused += float64(t.refused)
		if t.succeeded > 0 {
			withSuccess++
			p50 += float64(t.p50)
			p99 += float64(t.p99)
			pmax += float64(t.max)
		}
		if k == 0 {
			res.Load = slices.Clone(st.load)
			res.LoadCut = st.loadCut
		}
	}
	n := float64(s.Trials)
	res.Requests /= n
	res.Succeeded /= n
	res.GaveUp /= n
	res.PeakLoad /= n
	res.BudgetRefused /= n
	if withSuccess > 0 {
		ns := float64(withSuccess)
		res.CompletionP50 = time.Duration(p50 / ns)
		res.CompletionP99 = time.Duration(p99 / ns)
		res.CompletionMax = time.Duration(pmax / ns)
	}
	res.RequestsPerSuccess = math.Inf(1)
	if res.Succeeded > 0 {
		res.RequestsPerSuccess = res.Requests / res.Succeeded
	}
	return res, nil
}
