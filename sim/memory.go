package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/retrykit/retry"
)

// Memory model, in bytes. The per-client structures are allocated once per
// Run and the event chunks are reused, so nothing grows with the number of
// requests; only the per-slot index grows, with the number of slots that
// hold pending events at once. The estimate is an upper bound on the peak
// RSS measured with the CLI (dense herds: 33 B per client measured against
// 40 estimated; one client per slot: 310-330 B against 390).
const (
	eventBytes    = 32         // one pending event (event): the client's whole state
	successBytes  = 8          // one success time, for the percentiles
	bucketBytes   = 192        // per slot with pending events: list, index entry, heap key, room to grow
	selectBytes   = eventBytes // per request a slot accepts (capacity model)
	budgetBytes   = 184        // per budget window (one per process, or one shared)
	loadBytes     = 16         // per slot of Result.Load: the series and its copy
	runtimeBytes  = 16 << 20
	perClientBase = eventBytes + successBytes
)

// memory estimates the bytes that Run needs for s (resolved).
func (s *Scenario) memory() int64 {
	n := int64(s.Clients)
	total := float64(runtimeBytes) + float64(n)*perClientBase
	if s.Model == Contention {
		total += float64(n) * 4 // the version each client read
	}
	if s.Model == Capacity {
		// Each slot with pending events may hold a partly filled chunk.
		active := s.activeSlots()
		total += active * float64(chunkLen(n, active)*eventBytes+bucketBytes)
		if int64(s.Capacity) < n {
			total += float64(s.Capacity) * selectBytes
		}
	}
	if s.Budget != nil {
		total += float64(s.Processes) * budgetBytes
	}
	total += loadBytes * min(float64(MaxLoadSlots), float64(s.runSpan())/float64(s.Slot)+1)
	if total > math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(total)
}

// activeSlots bounds the number of slots with pending events at any time.
func (s *Scenario) activeSlots() float64 {
	return min(float64(s.Clients), float64(s.span())/float64(s.Slot)+2)
}

// maxWait is the longest a client may wait between two requests.
func (s *Scenario) maxWait() time.Duration {
	w := s.RetryAfter
	if s.Policy.Initial != retry.Immediate {
		_, hi := s.Policy.Bounds(math.MaxInt32)
		w = max(w, hi)
	}
	return w
}

// span bounds how far ahead of the current time a pending event may be.
func (s *Scenario) span() time.Duration { return max(s.maxWait(), s.StartWindow) }

// runSpan bounds the virtual time the run covers (MaxTime when unbounded).
// Its sums saturate: MaxElapsed may be as large as math.MaxInt64.
func (s *Scenario) runSpan() time.Duration {
	client := MaxTime
	if s.Policy.MaxElapsed > 0 {
		client = s.Policy.MaxElapsed
	}
	if ma := s.Policy.MaxAttempts; ma != retry.Unlimited {
		if ma == 0 {
			ma = retry.DefaultMaxAttempts
		}
		if w := s.maxWait(); w > 0 && int64(ma-1) < int64(client/w) {
			client = time.Duration(ma-1) * w
		} else if w == 0 {
			client = 0
		}
	}
	if s.Model == Contention {
		// Each call also takes four message delays; |Normal| rarely passes
		// eight standard deviations.
		return MaxTime
	}
	return min(MaxTime, time.Duration(addSat(int64(s.StartWindow), int64(client))))
}

// MaxRequests bounds the work of a run, all its Trials together. Up front
// (see Validate), Run refuses a Scenario whose Clients × Trials exceed it,
// and a capacity-model Scenario whose clients would surely send more
// requests than this (hours of work), retrying with waits of at most the
// policy's MaxDelay (or RetryAfter) while the server cannot take them:
// during the outage, or while it serves the others Capacity per Slot. A
// Budget exempts a Scenario from that check only if all it can grant over
// the whole run (see budgetGrants) keeps the run within MaxRequests; one
// that cannot is refused on what the clients could send, a bound rather
// than a certainty.
//
// While it runs, in both models (the contention model has no up-front
// bound: its work grows about as Clients² with unlimited attempts), Run
// ends with an error wrapping ErrScenario once it has processed more than
// MaxRequests requests (writes in the contention model) over all its
// trials. Only requests simulated one by one count: the attempts a client
// makes at one instant with zero waits and no budget are counted in one
// step and are not work.
const MaxRequests = 1e12

// minRequests is a lower bound on the requests of a capacity-model run
// that are simulated one by one, if no budget stops anyone. No client
// succeeds before Outage, and the j-th success (from 0) comes no sooner
// than max(0, Outage−Slot) + ⌊j/Capacity⌋ × Slot; a client that is still
// retrying after T, having started before StartWindow, with waits of at
// most maxWait, has sent at least one request per maxWait, unless
// MaxAttempts or MaxElapsed stopped it. The bound takes all clients until
// Outage, or the later half of them until the middle success.
//
// With zero waits (maxWait 0) a client whose first request fails retries
// at the same instant, in the same slot, where it fails again, until
// MaxAttempts stops it (finite: resolve refuses unlimited attempts here;
// MaxElapsed cannot stop a zero wait). Without a budget capacityTrial
// counts those attempts in one step, so the work is one step per client.
// With a budget every retry asks it and is simulated on its own, so the
// work is at least MaxAttempts per client refused at its first request:
// every client when all start before the outage ends (0 < Outage and
// StartWindow ≤ Outage); otherwise all but Capacity per slot of the
// ⌈StartWindow/Slot⌉ slots (at least one) the first requests land in.
func (s *Scenario) minRequests() float64 {
	w := float64(s.maxWait())
	if w <= 0 {
		n := float64(s.Clients)
		if s.Budget == nil {
			return n
		}
		refused := n
		if !(s.Outage > 0 && s.StartWindow <= s.Outage) {
			slots := max(math.Ceil(float64(s.StartWindow)/float64(s.Slot)), 1)
			refused = max(n-slots*float64(s.Capacity), 0)
		}
		ma := s.Policy.MaxAttempts
		if ma == 0 {
			ma = retry.DefaultMaxAttempts
		}
		return max(n, refused*float64(min(ma, math.MaxInt32)))
	}
	per := func(t float64) float64 { // requests of a client still retrying at t
		span := t - float64(s.StartWindow)
		if s.Policy.MaxElapsed > 0 {
			span = min(span, float64(s.Policy.MaxElapsed)-w)
		}
		n := 1 + math.Floor(max(span, 0)/w)
		if ma := s.Policy.MaxAttempts; ma != retry.Unlimited {
			if ma == 0 {
				ma = retry.DefaultMaxAttempts
			}
			n = min(n, float64(min(ma, math.MaxInt32)))
		}
		return n
	}
	n := float64(s.Clients)
	half := math.Floor(n / 2)
	mid := float64(max(s.Outage-s.Slot, 0)) + math.Floor(half/float64(s.Capacity))*float64(s.Slot)
	return max(n*per(float64(s.Outage)), (n-half)*per(mid))
}

// budgetGrants bounds the retries the fleet's budgets can grant in one
// trial of a capacity-model run (s resolved, with a Budget): when Clients
// plus this, times Trials, is within MaxRequests, the budget bounds the
// run's work by itself.
//
// The bound. A budget keeps its counts in slots of sub = Window/10 and
// grants a retry at slot k only if, after it, the retries R and first
// attempts F counted in slots k−9..k satisfy R ≤ reserve + Ratio × F
// (reserve = MinPerSecond × Window, the floor). Cut time into blocks of
// ten slots, B_m = slots 10m..10m+9. If j is the last slot of B_m with a
// grant, every retry of B_m lies in j−9..j (as j−9 ≤ 10m), so
//
//	R(B_m) ≤ R(j−9..j) ≤ reserve + Ratio × F(j−9..j)
//	       ≤ reserve + Ratio × (F(B_m−1) + F(B_m)).
//
// Summed over the blocks, each first attempt counts at most twice: one
// budget grants at most M × reserve + 2 × Ratio × F over M blocks, the
// floor being granted again in every block. The budget's clock in this
// model is the start of the slot being processed, within [0, lastSlot]
// (see lastSlot), so M = ⌊lastSlot / (10 × sub)⌋ + 1. The first attempts
// of all the budgets together are Clients, and there are Processes
// budgets, or one if SharedBudget.
func (s *Scenario) budgetGrants() float64 {
	var m budgetModel
	m.init(*s.Budget, 1, true)
	nb := float64(s.Processes)
	if s.SharedBudget {
		nb = 1
	}
	blocks := math.Floor(s.lastSlot()/(windowSlots*float64(m.sub))) + 1
	return nb*blocks*m.reserve + 2*m.ratio*float64(s.Clients)
}

// lastSlot bounds the start of the last slot in which a client of a
// capacity-model run (s resolved) acts, in nanoseconds: no later than
// runSpan, and, as no client is left retrying once the server has served
// them all:
//   - with zero waits (maxWait 0), every client acts only at its start,
//     before StartWindow;
//   - otherwise, let t0 be the first slot boundary at which every client
//     has started and the outage is over, and P = ⌈maxWait/Slot⌉ + 1
//     slots. In each P-slot period from t0 on, every client still
//     retrying sends at least once (its waits are at most maxWait <
//     P × Slot), and slots holding n_i of those requests accept
//     Σ min(n_i, Capacity) ≥ min(Σ n_i, Capacity) of them: at least
//     Capacity clients, or all that are left, succeed. Stops (MaxAttempts,
//     MaxElapsed, the budget) only end clients sooner. So after
//     ⌈Clients/Capacity⌉ periods none is left.
func (s *Scenario) lastSlot() float64 {
	span := float64(s.runSpan())
	slot := float64(s.Slot)
	w := s.maxWait()
	if w <= 0 {
		return min(span, math.Ceil(float64(s.StartWindow)/slot)*slot)
	}
	t0 := math.Ceil(float64(max(s.Outage, s.StartWindow))/slot) * slot
	periods := math.Ceil(float64(s.Clients) / float64(s.Capacity))
	return min(span, t0+periods*(math.Ceil(float64(w)/slot)+1)*slot)
}

// byteSize formats b in binary units, as "4.0 GiB".
func byteSize(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit && exp < 4; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTP"[exp])
}
