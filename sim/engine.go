package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/retrykit/retry"
)

// event is one pending event: client c sends a request (capacity), or its
// read or write reaches the server (contention), at time t (nanoseconds
// from the start of the trial). It carries the client's whole state, so
// that the queue is the only per-client memory touched (32 bytes; the
// contention model adds the version each client read, 4 bytes).
type event struct {
	t     int64
	start int64 // time of the client's first call
	prev  int64 // previous wait, for decorrelated jitter
	c     int32 // client number (ties are broken by it)
	calls int32 // calls that failed so far (saturates at math.MaxInt32)
}

func (a event) before(b event) bool { return a.t < b.t || a.t == b.t && a.c < b.c }

// state holds what is reused across trials.
type state struct {
	s           *Scenario
	maxAttempts int32 // math.MaxInt32 for retry.Unlimited
	unlimited   bool
	heap        []event // contention: the event queue
	ver         []int32 // contention: the version client c read, or -1 before its read
	done        []int64 // success times of this trial
	load        []int
	loadCut     bool  // the trial had calls past MaxLoadSlots, not in load
	finished    int64 // client runs finished over all trials (progress)
	rng         *rand.Rand
	budget      budgetModel
	q           calendar // capacity model
	sel         []event  // capacity model: the requests a slot accepts (a max-heap)
	steps       int      // events processed in the whole run (cancellation, progress, work)
	ctx         context.Context
	res         trialResult // the counts of the trial being run
	work        int64       // requests simulated one by one in the trials before it
	maxWork     float64     // bound on the requests simulated one by one over the run: MaxRequests in Run
}

type trialResult struct {
	requests, succeeded, gaveUp, refused int64
	bulk                                 int64 // requests counted in one step (zero waits), not work
	peak                                 int64
	p50, p99, max                        int64
}

func newState(s *Scenario) *state {
	st := &state{s: s, done: make([]int64, 0, s.Clients)}
	if s.Model == Capacity && s.Capacity < s.Clients {
		// The selection heap gets its full size now, as memory() charges
		// it: grown by append, the copies it left behind would be garbage
		// over the estimate. (With Capacity >= Clients it is never used.)
		st.sel = make([]event, 0, s.Capacity)
	}
	st.maxAttempts, st.unlimited = maxAttempts(s.Policy.MaxAttempts)
	if s.Model == Contention {
		st.heap = make([]event, 0, s.Clients)
		st.ver = make([]int32, s.Clients)
	}
	if s.Budget != nil {
		st.budget.init(*s.Budget, s.Processes, s.SharedBudget)
	}
	return st
}

// maxAttempts resolves Policy.MaxAttempts: math.MaxInt32 and true for
// retry.Unlimited, the default for zero, else the limit (at most
// math.MaxInt32).
func maxAttempts(ma int) (int32, bool) {
	switch {
	case ma == retry.Unlimited:
		return math.MaxInt32, true
	case ma == 0:
		return retry.DefaultMaxAttempts, false
	}
	return int32(min(ma, math.MaxInt32)), false
}

func addSat(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// errHorizon is returned when a client would act at or after MaxTime.
func errHorizon() error {
	return fmt.Errorf("%w: virtual time reached MaxTime (%v) with clients still retrying: "+
		"the server cannot serve them all (more Capacity, a longer Slot or fewer Clients)", ErrScenario, MaxTime)
}

// tick counts one processed event; every few thousand events of the run
// (the count goes on from trial to trial, so that many small trials are
// watched as one large one) it checks ctx and the work done, and reports
// progress.
func (st *state) tick() error {
	st.steps++
	if st.steps&0xfff == 0 {
		return st.check()
	}
	return nil
}

// check is tick's rare branch: it returns ctx's error, or errWork once the
// run has simulated more than maxWork requests one by one (this trial's
// included), and calls Progress every 16th time.
func (st *state) check() error {
	if err := st.ctx.Err(); err != nil {
		return err
	}
	if float64(st.work)+float64(st.res.requests-st.res.bulk) > st.maxWork {
		return errWork()
	}
	if st.steps&0xffff == 0 && st.s.Progress != nil {
		st.s.Progress(st.finished, int64(st.s.Clients)*int64(st.s.Trials))
	}
	return nil
}

// errWork is returned when a run has processed more than MaxRequests
// requests.
func errWork() error {
	return fmt.Errorf("%w: the run has processed over MaxRequests (%.0e) requests, all trials together: "+
		"its clients keep retrying (lengthen the waits, or limit Policy.MaxAttempts or MaxElapsed)",
		ErrScenario, MaxRequests)
}

// latency draws one message delay |Normal(Latency, LatencySD)|.
func (st *state) latency() int64 {
	x := math.Abs(st.rng.NormFloat64()*float64(st.s.LatencySD) + float64(st.s.Latency))
	if x >= math.MaxInt64/4 {
		return math.MaxInt64 / 4
	}
	return int64(x)
}

// sent records a call of client c at virtual time now with the budget.
func (st *state) sent(c *event, now int64) {
	if c.calls == 0 && st.budget.on {
		st.budget.first(c.c, now)
	}
}

// Reasons failed gives for not retrying.
const (
	stopRetry  = iota // retry at next
	stopGaveUp        // MaxAttempts or MaxElapsed
	stopBudget        // the budget refused the retry
)

// failed applies the stop rules, the policy's wait and the budget after
// client c's call failed with the response arriving at t; now is the
// budget's clock, or -1 to leave the budget to the caller. It returns when
// the client sends its next call, or why it does not.
func (st *state) failed(c *event, t, now int64, hint time.Duration) (next int64, stop int) {
	if c.calls < math.MaxInt32 {
		c.calls++
	}
	if !st.unlimited && c.calls >= st.maxAttempts {
		return 0, stopGaveUp
	}
	p := &st.s.Policy
	d := p.Delay(int(c.calls)-1, time.Duration(c.prev), st.rng)
	c.prev = int64(d)
	if hint > d {
		d = hint
	}
	if p.MaxElapsed > 0 && d >= p.MaxElapsed-time.Duration(t-c.start) { // as retry.Do: no time left
		return 0, stopGaveUp
	}
	if st.budget.on && now >= 0 && !st.budget.allow(c.c, now) {
		return 0, stopBudget
	}
	return addSat(t, int64(d)), stopRetry
}

// gaveUp counts a client that stopped for reason stop.
func (st *state) gaveUp(r *trialResult, stop int) {
	r.gaveUp++
	if stop == stopBudget {
		r.refused++
	}
	st.finished++
}

func (st *state) push(e event) { pushEvent(&st.heap, e) }

func (st *state) pop() event { return popEvent(&st.heap) }

// pushEvent adds e to the min-heap *h (in before order).
func pushEvent(hp *[]event, e event) {
	h := append(*hp, e)
	j := len(h) - 1
	for j > 0 {
		parent := (j - 1) / 2
		if !e.before(h[parent]) {
			break
		}
		h[j] = h[parent]
		j = parent
	}
	h[j] = e
	*hp = h
}

// popEvent removes and returns the first event of the non-empty min-heap *h.
func popEvent(hp *[]event) event {
	h := *hp
	top := h[0]
	n := len(h) - 1
	last := h[n]
	h = h[:n]
	if n > 0 {
		siftDown(h, 0, last)
	}
	*hp = h
	return top
}

// siftDown places e, which belongs at index j or below, into the heap h.
func siftDown(h []event, j int, e event) {
	n := len(h)
	for {
		l := 2*j + 1
		if l >= n {
			break
		}
		if r := l + 1; r < n && h[r].before(h[l]) {
			l = r
		}
		if !h[l].before(e) {
			break
		}
		h[j] = h[l]
		j = l
	}
	h[j] = e
}

func (st *state) heapify() {
	h := st.heap
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i, h[i])
	}
}

// slotCounter counts calls per slot, in slot order, into the load series
// (cut at MaxLoadSlots) and the peak (not cut).
type slotCounter struct {
	slot, n, peak int64
}

// add counts n calls in slot, which is at or after every slot counted
// before.
func (sc *slotCounter) add(st *state, slot, n int64) {
	if slot != sc.slot {
		sc.flush(st)
		sc.slot = slot
	}
	sc.n = addSat(sc.n, n)
}

func (sc *slotCounter) flush(st *state) {
	if sc.n == 0 {
		return
	}
	sc.peak = max(sc.peak, sc.n)
	if sc.slot < MaxLoadSlots {
		if need := int(sc.slot) + 1; len(st.load) < need {
			old := len(st.load)
			st.load = slices.Grow(st.load, need-old)[:need]
			clear(st.load[old:])
		}
		st.load[sc.slot] = int(sc.n)
	} else {
		st.loadCut = true
	}
	sc.n = 0
}

// awaiting, in ver, marks a client whose failed write is being answered
// (contention model with a budget): its event, at the answer's arrival,
// is the retry decision.
const awaiting = -2

// trial runs trial k.
func (st *state) trial(k uint64) (trialResult, error) {
	s := st.s
	st.work += st.res.requests - st.res.bulk // the previous trial's
	st.res = trialResult{}
	st.rng = rand.New(rand.NewPCG(s.Seed, k))
	st.done = st.done[:0]
	st.load = st.load[:0]
	st.loadCut = false
	st.budget.reset()
	if s.Model == Capacity {
		return st.capacityTrial()
	}
	st.heap = st.heap[:0]
	for i := range s.Clients {
		var start int64
		if s.StartWindow > 0 {
			start = st.rng.Int64N(int64(s.StartWindow))
		}
		st.heap = append(st.heap, event{t: start + st.latency(), start: start, c: int32(i)})
		st.ver[i] = -1
	}
	st.heapify()

	var (
		r       = &st.res
		sc      slotCounter
		version int32
		slotW   = int64(s.Slot)
	)
	for len(st.heap) > 0 {
		if err := st.tick(); err != nil {
			return *r, err
		}
		e := st.pop()
		ver := &st.ver[e.c]
		if *ver == awaiting {
			// The answer to a failed write reaches the client at e.t: the
			// budget decides now, in time order with every other event, as
			// retry.Budget would (failed has applied the other rules and
			// drawn the wait, e.prev: no hint in this model).
			if !st.budget.allow(e.c, e.t) {
				st.gaveUp(r, stopBudget)
				continue
			}
			e.t = addSat(addSat(e.t, e.prev), st.latency())
			*ver = -1
			st.push(e)
			continue
		}
		if e.t >= int64(MaxTime) {
			return *r, errHorizon()
		}
		switch {
		case *ver < 0: // a read
			*ver = version
			e.t = addSat(e.t, st.latency()+st.latency())
			st.push(e)
		default: // a write
			r.requests++
			sc.add(st, e.t/slotW, 1)
			st.sent(&e, e.t)
			resp := addSat(e.t, st.latency())
			if *ver == version {
				version++
				st.done = append(st.done, resp)
				st.finished++
				continue
			}
			if st.budget.on {
				// Whether the client may retry is asked of the budget when
				// the answer arrives, at resp: an event of its own, so
				// that the budget sees the run in time order.
				if _, stop := st.failed(&e, resp, -1, 0); stop != stopRetry {
					st.gaveUp(r, stop)
					continue
				}
				e.t = resp
				*ver = awaiting
				st.push(e)
				continue
			}
			next, stop := st.failed(&e, resp, resp, 0)
			if stop != stopRetry {
				st.gaveUp(r, stop)
				continue
			}
			e.t = addSat(next, st.latency())
			*ver = -1
			st.push(e)
		}
	}
	sc.flush(st)
	r.peak = sc.peak
	return st.finish(*r), nil
}

// finish fills in the per-trial statistics from st.done.
func (st *state) finish(r trialResult) trialResult {
	if st.s.Progress != nil {
		st.s.Progress(st.finished, int64(st.s.Clients)*int64(st.s.Trials))
	}
	r.succeeded = int64(len(st.done))
	if n := len(st.done); n > 0 {
		slices.Sort(st.done)
		rank := func(q float64) int64 { return st.done[max(int(math.Ceil(q*float64(n)))-1, 0)] }
		r.p50, r.p99, r.max = rank(0.5), rank(0.99), st.done[n-1]
	}
	return r
}
