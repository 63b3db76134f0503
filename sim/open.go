package sim

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/retrykit/retry"
)

// Arrivals selects how the calls of an [OpenScenario] arrive.
type Arrivals uint8

const (
	// Even (the zero Arrivals) spaces the calls exactly 1/Rate apart.
	Even Arrivals = iota
	// Poisson draws the gaps between calls from an exponential
	// distribution of mean 1/Rate (seeded by OpenScenario.Seed).
	Poisson
)

// String returns "even" or "poisson".
func (a Arrivals) String() string {
	switch a {
	case Even:
		return "even"
	case Poisson:
		return "poisson"
	}
	return fmt.Sprintf("Arrivals(%d)", uint8(a))
}

// ParseArrivals returns the Arrivals named s ("even" or "poisson").
func ParseArrivals(s string) (Arrivals, error) {
	switch s {
	case "even":
		return Even, nil
	case "poisson":
		return Poisson, nil
	}
	return 0, fmt.Errorf("sim: unknown arrivals %q (want even or poisson)", s)
}

// Defaults of an OpenScenario, used where a field is zero.
const (
	DefaultOpenSlot = time.Second // one entry of OpenResult.Series
)

// Recovery criteria of [OpenResult.Recovered].
const (
	// RecoveryWindow is the span over which goodput is compared with
	// arrivals: long enough that arrival noise alone cannot fail the
	// comparison (at 100 calls/s a Poisson count over 10 s has a standard
	// deviation of 3 %).
	RecoveryWindow = 10 * time.Second
	// RecoveryShare is the share of the arrivals that goodput must reach
	// in every RecoveryWindow.
	RecoveryShare = 0.95
	// RecoveryTail is the least run left after the recovery point.
	RecoveryTail = 30 * time.Second
)

// Limits of the open model (see the package doc, "Bounded work and
// memory").
const (
	// DefaultMaxWork is the most attempts an open-model run may simulate
	// one by one, for a zero OpenScenario.MaxWork: about a minute and a
	// half of one core at the pace of the stuck Huang run
	// (BenchmarkOpenHuang: 2e7 attempts in 1.9 s, 2026-12-07).
	DefaultMaxWork = 1e9

	// MaxOpenRate is the highest Rate (times SpikeFactor) and
	// ServiceRate the open model represents: its clock counts whole
	// nanoseconds, so one request per nanosecond.
	MaxOpenRate = 1e9

	// OpenBytesPerCall is the memory an open-model run needs per attempt
	// in flight (queued or awaiting its answer) and per call waiting to
	// retry: 32 bytes each, in buffers that double as they grow (64 bytes
	// after a doubling, 96 during the copy).
	OpenBytesPerCall = 96

	// openBytesPerSlot is the memory of one entry of OpenResult.Series.
	openBytesPerSlot = 64
)

// OpenScenario is the open-system model: calls arrive at Rate per second
// whatever happens to them, and a FIFO server completes ServiceRate
// requests per second; see the package doc. The zero value of every field
// means its default or "none"; Rate, ServiceRate and Duration are
// required. An OpenScenario is a plain value and may be reused.
type OpenScenario struct {
	// Rate is the calls arriving per second. Required (> 0, finite).
	Rate float64

	// Arrivals is Even (zero) or Poisson.
	Arrivals Arrivals

	// ServiceRate is the requests per second the server completes, one
	// at a time, each taking 1/ServiceRate of its full capacity. Required
	// (> 0, finite).
	ServiceRate float64

	// QueueLimit, if positive, is the most requests that may wait in the
	// server's queue (the one in service not counted): a request that
	// finds it full is rejected at once, as with a 503. Zero means an
	// unbounded queue; negative is an error.
	QueueLimit int

	// DropExpired makes the server drop, at no cost, a queued request
	// whose client has stopped waiting for it. False means the server
	// serves it anyway (wasted work).
	DropExpired bool

	// Timeout is the client's attempt timeout: a client whose attempt has
	// not been answered after Timeout abandons it and follows the policy
	// (a failed attempt). Zero means no timeout (the client waits as long
	// as it takes); negative is an error.
	Timeout time.Duration

	// TriggerAt and TriggerFor place the trigger: during [TriggerAt,
	// TriggerAt+TriggerFor) the server completes
	// ServiceRate × TriggerCapacity requests per second. TriggerFor zero
	// means no trigger.
	TriggerAt, TriggerFor time.Duration

	// TriggerCapacity is the fraction of ServiceRate left during the
	// trigger, in [0, 1]: zero (the default) is an outage.
	TriggerCapacity float64

	// SpikeAt, SpikeFor and SpikeFactor are a load spike: during
	// [SpikeAt, SpikeAt+SpikeFor) calls arrive at Rate × SpikeFactor.
	// SpikeFor or SpikeFactor zero means no spike; SpikeFactor must be
	// finite and not negative.
	SpikeAt, SpikeFor time.Duration
	SpikeFactor       float64

	// Duration is the virtual time simulated. Required (> 0, at most
	// MaxDuration, and at most MaxLoadSlots slots).
	Duration time.Duration

	// Slot is the width of one entry of OpenResult.Series. Zero means
	// DefaultOpenSlot (1 s); it must not exceed Duration.
	Slot time.Duration

	// Seed selects the random streams: rand.New(rand.NewPCG(Seed, 1))
	// for the Poisson gaps, and rand.New(rand.NewPCG(Seed, 0)) for the
	// clients' draws (jitter, throttle). The arrivals do not depend on
	// the policy, so every strategy run with one Seed sees the same calls
	// at the same times (common random numbers). The same OpenScenario
	// gives the same OpenResult.
	Seed uint64

	// Policy is what every call follows, as retry.Do would: its Delay
	// gives each wait (Initial retry.Immediate resends at once),
	// MaxAttempts and MaxElapsed end a call. Every failure is retryable;
	// AttemptTimeout, Retryable, hooks and loggers do not apply (Timeout
	// is the attempt timeout here). Policy.Budget and Policy.Throttle are
	// rejected: they count in real time; give them as Budget and Throttle.
	// MaxAttempts above math.MaxInt32 count as math.MaxInt32.
	Policy retry.Policy

	// Processes splits the calls into a fleet of processes: call i (from
	// 0, in arrival order) belongs to process i mod Processes. It matters
	// only with a Budget or a Throttle. Zero means 1; at most 1<<20.
	Processes int

	// Budget, if not nil, is a retry budget with retry.Budget's rule in
	// virtual time, as Scenario.Budget; one per process unless
	// SharedBudget. Nil means none.
	Budget *retry.BudgetConfig

	// SharedBudget makes the processes draw on one Budget for the whole
	// fleet (exact fleet-wide counts) instead of one each. It needs a
	// Budget.
	SharedBudget bool

	// Throttle, if not nil, is adaptive client-side throttling with
	// retry.Throttle's rule in virtual time: before each attempt, the
	// first included, the client rejects it locally with probability
	// min(MaxProbability, max(0, (requests − K × accepts) / (requests + 1)))
	// over the window,
	// where an attempt answered in time is accepted, and one that timed
	// out or was rejected by a full queue is not (retry.Throttle's default
	// rule); a locally rejected attempt fails at once, as retry.Do's
	// ErrThrottled. One per process unless SharedThrottle (a fleet-wide
	// count with no sync delay). Accepted and Observer must be nil. Nil
	// means none.
	Throttle *retry.ThrottleConfig

	// SharedThrottle makes the processes share one Throttle, counting the
	// requests and accepts of the whole fleet, instead of one each. It
	// needs a Throttle.
	SharedThrottle bool

	// Quota, if not nil, is the AWS SDKs' retry quota ([RetryQuota]),
	// asked before each retry after the Budget; one per process unless
	// SharedQuota. Nil means none.
	Quota *RetryQuota

	// SharedQuota makes the processes draw on one Quota. It needs a
	// Quota.
	SharedQuota bool

	// MaxWork is the most attempts the run may simulate one by one: a
	// scenario whose estimate ([OpenScenario.Work]) is larger is refused
	// before it starts, and a run that makes more ends with an error
	// wrapping ErrScenario. Zero means DefaultMaxWork (1e9); negative
	// means no limit.
	MaxWork float64

	// MaxMemory is the most memory the run may take, in bytes: a scenario
	// whose calls must pile up past it (no Timeout, more arrivals than
	// the server can serve) is refused before it starts, and a run whose
	// attempts in flight reach it (OpenBytesPerCall each, plus the
	// series) ends with an error wrapping ErrScenario. Zero means
	// DefaultMaxMemory (4 GiB); negative means no limit.
	MaxMemory int64

	// Progress, if not nil, is called from RunOpen's goroutine now and
	// then with the virtual time simulated so far and Duration. It must
	// be quick.
	Progress func(done, total time.Duration)
}

// OpenSlot is what happened in one slot of an open-model run.
type OpenSlot struct {
	Arrivals  int64 // calls that arrived
	Sent      int64 // attempts sent to the server (first attempts and retries)
	Throttled int64 // attempts rejected locally by the throttle, not sent
	Rejected  int64 // attempts the server rejected at once (full queue)
	Served    int64 // requests the server completed, wasted ones included
	Goodput   int64 // requests completed while their client still waited
	Wasted    int64 // requests completed after their client had left
	Queue     int64 // requests waiting at the server at the end of the slot
}

// OpenResult is what an OpenScenario produced.
type OpenResult struct {
	// Slot is the width of each entry of Series; Series[i] covers
	// [i*Slot, (i+1)*Slot) (the last one may be shorter).
	Slot   time.Duration
	Series []OpenSlot

	// Total sums Series (Queue: the queue at the end of the run).
	Total OpenSlot

	// Succeeded and GaveUp count the calls that ended (stopped by
	// MaxAttempts, MaxElapsed, the budget or the quota); BudgetRefused is
	// how many of those the Budget or the Quota stopped. Calls still under way at the end are
	// in neither.
	Succeeded, GaveUp, BudgetRefused int64

	// ArrivalsPerSecond, OfferedPerSecond and GoodputPerSecond are the
	// calls arriving, the attempts sent to the server and the goodput,
	// per second, over the last 20 % of the run (its final state).
	ArrivalsPerSecond, OfferedPerSecond, GoodputPerSecond float64

	// Amplification is OfferedPerSecond / ArrivalsPerSecond: attempts
	// sent per call over the last 20 % of the run.
	Amplification float64

	// Recovered reports that, from some point at or after the end of the
	// trigger and the spike (TriggerEnd) with at least RecoveryTail of
	// the run left, the goodput of every RecoveryWindow (in whole slots)
	// is at least RecoveryShare of the arrivals of that window, and the
	// server keeps up: the attempts it admitted from that point on are
	// fewer than it can serve in that time, so its queue is not growing.
	// RecoveryTime is that point's distance from TriggerEnd (the first
	// such point, in whole slots), zero when not Recovered.
	Recovered    bool
	RecoveryTime time.Duration
	TriggerEnd   time.Duration

	// CannotTell reports that the run cannot say whether the system
	// recovered: TriggerEnd leaves less than RecoveryTail (or less than
	// one RecoveryWindow) of the run after it, or lies beyond the run.
	// Recovered is then false and means nothing.
	CannotTell bool

	// PeakQueue is the longest the server's queue was, and PeakInFlight
	// the most attempts and calls held at once (see OpenBytesPerCall).
	PeakQueue, PeakInFlight int64

	// Processes is the number of processes, and Budget and Throttle
	// "local", "shared" or "" (none).
	Processes        int
	Budget, Throttle string
}

func (s *OpenScenario) resolve() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrScenario}, a...)...)
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !(s.Rate > 0) || !finite(s.Rate):
		return bad("Rate %v must be a positive number", s.Rate)
	case !(s.ServiceRate > 0) || !finite(s.ServiceRate):
		return bad("ServiceRate %v must be a positive number", s.ServiceRate)
	case s.ServiceRate > MaxOpenRate:
		return bad("ServiceRate %v is over %.0e per second, one request per nanosecond, the model's resolution", s.ServiceRate, MaxOpenRate)
	case s.Rate*max(s.SpikeFactor, 1) > MaxOpenRate:
		return bad("Rate %v (times SpikeFactor) is over %.0e per second, one call per nanosecond, the model's resolution", s.Rate, MaxOpenRate)
	case math.IsNaN(s.MaxWork):
		return bad("MaxWork is NaN")
	case s.Arrivals > Poisson:
		return bad("unknown Arrivals %d", s.Arrivals)
	case s.QueueLimit < 0:
		return bad("QueueLimit %d is negative", s.QueueLimit)
	case !(s.TriggerCapacity >= 0 && s.TriggerCapacity <= 1):
		return bad("TriggerCapacity %v is not a fraction in [0, 1]", s.TriggerCapacity)
	case !(s.SpikeFactor >= 0) || !finite(s.SpikeFactor):
		return bad("SpikeFactor %v must be a finite number, not negative", s.SpikeFactor)
	case s.Duration <= 0:
		return bad("Duration %v must be positive", s.Duration)
	case s.Processes < 0:
		return bad("Processes %d is negative", s.Processes)
	case s.Processes > 1<<20:
		return bad("Processes %d is over %d", s.Processes, 1<<20)
	case s.Policy.Budget != nil:
		return bad("Policy.Budget counts real time: give the simulated budget as Budget")
	case s.Policy.Throttle != nil:
		return bad("Policy.Throttle counts real time: give the simulated throttle as Throttle")
	case s.SharedBudget && s.Budget == nil:
		return bad("SharedBudget needs a Budget")
	case s.SharedThrottle && s.Throttle == nil:
		return bad("SharedThrottle needs a Throttle")
	case s.SharedQuota && s.Quota == nil:
		return bad("SharedQuota needs a Quota")
	}
	if s.Quota != nil {
		if err := s.Quota.validate(); err != nil {
			return err
		}
	}
	for _, d := range []struct {
		name     string
		v        time.Duration
		isPolicy bool // negative values are the policy's to judge (retry.Immediate)
	}{{"Timeout", s.Timeout, false}, {"TriggerAt", s.TriggerAt, false}, {"TriggerFor", s.TriggerFor, false},
		{"SpikeAt", s.SpikeAt, false}, {"SpikeFor", s.SpikeFor, false}, {"Duration", s.Duration, false},
		{"Slot", s.Slot, false}, {"Policy.Initial", s.Policy.Initial, true}, {"Policy.MaxDelay", s.Policy.MaxDelay, true}} {
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
	if s.Budget != nil {
		if _, err := retry.NewBudget(*s.Budget); err != nil {
			return bad("Budget.%s", strings.TrimPrefix(err.Error(), "retry: BudgetConfig."))
		}
	}
	if s.Throttle != nil {
		if s.Throttle.Accepted != nil {
			return bad("Throttle.Accepted is not modelled: an attempt answered in time is accepted, one that timed out or met a full queue is not")
		}
		if s.Throttle.Observer != nil {
			return bad("Throttle.Observer is not modelled: the simulated throttle reports no events")
		}
		if _, err := retry.NewThrottle(*s.Throttle); err != nil {
			return bad("Throttle.%s", strings.TrimPrefix(err.Error(), "retry: ThrottleConfig."))
		}
	}
	if s.Policy.Initial == retry.Immediate && s.Policy.MaxAttempts == retry.Unlimited && (s.QueueLimit > 0 || s.Throttle != nil) {
		return bad("Policy.Initial retry.Immediate (no waits) with Policy.MaxAttempts retry.Unlimited never ends: " +
			"an attempt rejected by a full queue or the throttle is retried at the same instant, forever; limit MaxAttempts")
	}
	if s.Slot == 0 {
		s.Slot = DefaultOpenSlot
	}
	if s.Slot > s.Duration {
		return bad("Slot %v is longer than Duration %v", s.Slot, s.Duration)
	}
	if n := (s.Duration + s.Slot - 1) / s.Slot; n > MaxLoadSlots {
		return bad("Duration %v is %d slots of %v, over MaxLoadSlots (%d)", s.Duration, n, s.Slot, MaxLoadSlots)
	}
	if s.Processes == 0 {
		s.Processes = 1
	}
	if s.MaxWork == 0 {
		s.MaxWork = DefaultMaxWork
	}
	if s.MaxMemory == 0 {
		s.MaxMemory = DefaultMaxMemory
	}
	if w := s.work(); s.MaxWork > 0 && w > s.MaxWork {
		return bad("about %.3g attempts to simulate (%.3g calls, up to %.3g attempts each), over MaxWork (%.3g): "+
			"shorten Duration, lower Rate, limit Policy.MaxAttempts, or lengthen the waits or the Timeout",
			w, s.arrivals(), w/max(s.arrivals(), 1), s.MaxWork)
	}
	if need := s.memoryFloor(); s.MaxMemory > 0 && need > float64(s.MaxMemory) {
		return bad("needs at least %s: with no Timeout, the calls the server cannot serve pile up, "+
			"over MaxMemory %s", byteSize(int64(min(need, math.MaxInt64/2))), byteSize(s.MaxMemory))
	}
	return nil
}

// arrivals returns the calls arriving in the run, spike included.
func (s *OpenScenario) arrivals() float64 {
	d := s.Duration.Seconds()
	if s.SpikeFor > 0 && s.SpikeFactor != 0 {
		a, b := min(s.SpikeAt, s.Duration), min(s.SpikeAt+s.SpikeFor, s.Duration)
		spike := (b - a).Seconds()
		return s.Rate*(d-spike) + s.Rate*s.SpikeFactor*spike
	}
	return s.Rate * d
}

// served returns the requests the server can complete in the run.
func (s *OpenScenario) served() float64 {
	d := s.Duration.Seconds()
	if s.TriggerFor > 0 {
		a, b := min(s.TriggerAt, s.Duration), min(s.TriggerAt+s.TriggerFor, s.Duration)
		t := (b - a).Seconds()
		return s.ServiceRate*(d-t) + s.ServiceRate*s.TriggerCapacity*t
	}
	return s.ServiceRate * d
}

// Work returns an estimate of the attempts RunOpen simulates one by one
// for s, the number MaxWork bounds: the calls arriving times the attempts
// one call can make if every attempt fails. An attempt fails at once when
// a QueueLimit or a Throttle may reject it, else after Timeout; the waits
// between attempts are the policy's mean waits ([retry.Policy.Bounds]);
// a call's attempts end at MaxAttempts, MaxElapsed or the end of the run.
// Immediate resends into a full queue are counted in one step, as RunOpen
// does. Without a Timeout, QueueLimit and Throttle no attempt fails: one
// each. Work of a scenario Validate refuses is meaningless.
func (s OpenScenario) Work() float64 {
	if s.Slot == 0 {
		s.Slot = DefaultOpenSlot
	}
	return s.work()
}

func (s *OpenScenario) work() float64 {
	a := s.arrivals()
	return a * s.attemptsPerCall(a)
}

// attemptsPerCall is the most attempts one call of s makes one by one,
// by Work's rule; it stops counting past MaxWork/arrivals.
func (s *OpenScenario) attemptsPerCall(arrivals float64) float64 {
	maxA, unlimited := maxAttempts(s.Policy.MaxAttempts)
	limit := math.Inf(1)
	if !unlimited {
		limit = float64(maxA)
	}
	atOnce := s.QueueLimit > 0 || s.Throttle != nil
	if limit <= 1 || !atOnce && s.Timeout == 0 {
		return 1
	}
	horizon := s.Duration
	if s.Policy.MaxElapsed > 0 {
		horizon = min(horizon, s.Policy.MaxElapsed)
	}
	if s.Policy.Initial == retry.Immediate && s.QueueLimit > 0 && s.Throttle == nil && s.Budget == nil && s.Quota == nil {
		// A burst of rejections at one instant is one step: per attempt
		// queued, at most one burst.
		entries := 1.0
		if s.Timeout > 0 {
			entries += math.Floor(float64(horizon) / float64(s.Timeout))
		}
		return min(limit, 2*entries)
	}
	timeout := s.Timeout
	if atOnce {
		timeout = 0
	}
	stop := limit
	if s.MaxWork > 0 {
		stop = min(stop, math.Floor(s.MaxWork/max(arrivals, 1))+2)
	}
	// Walk the schedule until the waits stop growing, then count the
	// rest at the last cycle.
	var t float64 // time used so far, ns
	n := 1.0      // attempts so far
	prevCycle := -1.0
	for k := 0; n < stop; k++ {
		lo, hi := s.Policy.Bounds(k)
		cycle := float64(timeout) + (float64(lo)+float64(hi))/2
		if cycle == prevCycle || k >= 1<<12 {
			if cycle <= 0 {
				return stop
			}
			return min(stop, n+math.Floor((float64(horizon)-t)/cycle))
		}
		prevCycle = cycle
		if t+cycle > float64(horizon) {
			return n
		}
		t += cycle
		n++
	}
	return n
}

// memoryFloor returns the memory s surely needs: without a Timeout (and
// without a QueueLimit) every call the server cannot complete stays
// queued to the end.
func (s *OpenScenario) memoryFloor() float64 {
	slots := float64((s.Duration + s.Slot - 1) / s.Slot)
	need := slots * openBytesPerSlot
	if s.Timeout == 0 && s.QueueLimit == 0 {
		need += max(s.arrivals()-s.served(), 0) * OpenBytesPerCall / 3 // 32 bytes each at least
	}
	return need
}

// Validate reports whether RunOpen would accept s, with the error it
// would return: every field in range (see each field), the rates at most
// MaxOpenRate, the Policy valid and without Budget or Throttle, the
// Budget and Throttle valid as retry.NewBudget and retry.NewThrottle
// judge them, immediate resends with unlimited attempts refused where a
// rejection would repeat at one instant (a QueueLimit or a Throttle), the
// work estimate ([OpenScenario.Work]) at most MaxWork, and the memory the
// run surely needs at most MaxMemory. The errors wrap ErrScenario, or retry.ErrInvalidPolicy for
// a bad Policy. The zero OpenScenario is refused: Rate, ServiceRate and
// Duration are required.
func (s OpenScenario) Validate() error { return s.resolve() }

// TriggerEnd is when the trigger and the spike are both over: the point
// from which recovery is measured.
func (s OpenScenario) TriggerEnd() time.Duration {
	end := time.Duration(0)
	if s.TriggerFor > 0 {
		end = s.TriggerAt + s.TriggerFor
	}
	if s.SpikeFor > 0 && s.SpikeFactor != 0 && s.SpikeAt+s.SpikeFor > end {
		end = s.SpikeAt + s.SpikeFor
	}
	return end
}

// RunOpen simulates s, which Validate must accept, and returns its
// result. It is deterministic. It ends with an error wrapping ErrScenario
// if the attempts and calls it holds at once need more than MaxMemory or
// it simulates more than MaxWork attempts, and with ctx's error if ctx
// ends first (checked every few thousand events).
//
// Memory: OpenBytesPerCall (96 bytes) at most per attempt queued or
// awaiting its answer and per call waiting to retry (the requests a server
// still serves after their client left are a count), 64 bytes per slot of
// the series, and 184 bytes per Budget or Throttle window: bounded by what
// is in flight, not by the number of calls.
func RunOpen(ctx context.Context, s OpenScenario) (OpenResult, error) {
	if err := s.resolve(); err != nil {
		return OpenResult{}, err
	}
	e := newOpenEngine(&s, ctx)
	if err := e.run(); err != nil {
		return OpenResult{}, err
	}
	return e.result(), nil
}
