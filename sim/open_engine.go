package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/retrykit/retry"
)

// call is one call of the open model, with the attempt it has in flight,
// held in an event: t is when the attempt was sent (or, waiting in the
// retry heap, when the next one is due), start when the call arrived, prev
// its previous wait, calls the attempts that failed so far, and c the
// process it belongs to.
type call = event

// ring is a FIFO of calls that grows by doubling: its size is the most
// calls it ever held at once.
type ring struct {
	buf     []call
	head, n int
}

func (r *ring) push(c call) {
	if r.n == len(r.buf) {
		nb := make([]call, max(2*len(r.buf), 1024))
		k := copy(nb, r.buf[r.head:])
		copy(nb[k:], r.buf[:r.head])
		r.buf, r.head = nb, 0
	}
	i := r.head + r.n
	if i >= len(r.buf) {
		i -= len(r.buf)
	}
	r.buf[i] = c
	r.n++
}

func (r *ring) front() *call { return &r.buf[r.head] }

func (r *ring) pop() call {
	c := r.buf[r.head]
	r.head++
	if r.head == len(r.buf) {
		r.head = 0
	}
	r.n--
	return c
}

// clock is a rate that is base per nanosecond except during [a, b), where
// it is base × f: the server's work (requests completed) or the arrivals'
// count, as a function of virtual time.
type clock struct {
	r, f   float64 // rate per ns, and its factor during [a, b)
	a, b   int64
	wa, wb float64 // at(a), at(b)
}

func newClock(perSecond, f float64, a, b int64) clock {
	c := clock{r: perSecond / 1e9, f: f, a: a, b: b}
	if b <= a {
		c.b, c.f = c.a, 1
	}
	c.wa = c.r * float64(c.a)
	c.wb = c.wa + c.r*c.f*float64(c.b-c.a)
	return c
}

// at returns the count at time t.
func (c *clock) at(t int64) float64 {
	switch {
	case t <= c.a:
		return c.r * float64(t)
	case t <= c.b:
		return c.wa + c.r*c.f*float64(t-c.a)
	}
	return c.wb + c.r*float64(t-c.b)
}

// when returns the first time at which the count reaches w, rounded to
// the nanosecond and saturated at math.MaxInt64.
func (c *clock) when(w float64) int64 {
	var t float64
	switch {
	case w <= c.wa:
		t = w / c.r
	case c.f > 0 && w <= c.wb:
		t = float64(c.a) + (w-c.wa)/(c.r*c.f)
	default:
		t = float64(c.b) + (w-c.wb)/c.r
	}
	if !(t < math.MaxInt64/2) {
		return math.MaxInt64 / 2
	}
	return int64(math.Round(t))
}

const never = math.MaxInt64 / 2 // later than any event

// openEngine runs one OpenScenario.
type openEngine struct {
	s           *OpenScenario
	ctx         context.Context
	rng         *rand.Rand // the clients' draws: jitter and throttle
	arrRNG      *rand.Rand // the arrivals' draws: Poisson gaps
	maxAttempts int32
	unlimited   bool
	timeout     int64 // 0: none
	end, slotW  int64
	budget      budgetModel
	throttle    throttleModel
	quota       quotaModel

	arrivals    clock
	arrivalW    float64 // the count the next arrival is at
	nextArrival int64
	nArrived    int64

	work      clock   // the server's capacity
	target    float64 // the work count at which the request in service is done
	busy      bool
	svc       call // the request in service
	svcLive   bool // its client still waits for it
	doneAt    int64
	queue     ring  // queued requests whose clients still wait, in send order
	abandoned int64 // queued requests ahead of them whose clients left

	retries []call // min-heap by t: calls waiting to send their next attempt

	series                           []OpenSlot
	cur                              int // the slot whose Queue is not yet set
	succeeded, gaveUp, refused       int64
	peakQueue, peakInFlight, attempt int64
	simulated                        float64 // attempts simulated one by one
	maxInFlight                      int64   // from MaxMemory; 0: no limit
	steps                            int
	lastT                            int64 // the time of the last event
}

func newOpenEngine(s *OpenScenario, ctx context.Context) *openEngine {
	e := &openEngine{s: s, ctx: ctx, rng: rand.New(rand.NewPCG(s.Seed, 0)),
		arrRNG:  rand.New(rand.NewPCG(s.Seed, 1)),
		timeout: int64(s.Timeout), end: int64(s.Duration), slotW: int64(s.Slot)}
	e.maxAttempts, e.unlimited = maxAttempts(s.Policy.MaxAttempts)
	if s.Budget != nil {
		e.budget.init(*s.Budget, s.Processes, s.SharedBudget)
	}
	if s.Throttle != nil {
		e.throttle.init(*s.Throttle, s.Processes, s.SharedThrottle)
	}
	if s.Quota != nil {
		e.quota.init(*s.Quota, s.Processes, s.SharedQuota)
	}
	var ta, tb int64
	if s.TriggerFor > 0 {
		ta, tb = int64(s.TriggerAt), int64(s.TriggerAt+s.TriggerFor)
	}
	e.work = newClock(s.ServiceRate, s.TriggerCapacity, ta, tb)
	var sa, sb int64
	if s.SpikeFor > 0 && s.SpikeFactor != 0 {
		sa, sb = int64(s.SpikeAt), int64(s.SpikeAt+s.SpikeFor)
	}
	e.arrivals = newClock(s.Rate, s.SpikeFactor, sa, sb)
	e.series = make([]OpenSlot, (e.end+e.slotW-1)/e.slotW)
	if s.MaxMemory > 0 {
		e.maxInFlight = max((s.MaxMemory-int64(len(e.series))*openBytesPerSlot)/OpenBytesPerCall, 1)
	}
	e.nextArrival = e.drawArrival()
	return e
}

// drawArrival returns the time of the next call: the next whole count of
// the arrival clock (Even), or a count one exponential gap further
// (Poisson, exact for a rate that changes at the spike's edges).
func (e *openEngine) drawArrival() int64 {
	w := e.arrivalW
	if e.s.Arrivals == Poisson {
		w += e.arrRNG.ExpFloat64()
		e.arrivalW = w
	} else {
		e.arrivalW++
	}
	return e.arrivals.when(w)
}

func (e *openEngine) slot(t int64) *OpenSlot { return &e.series[t/e.slotW] }

func (e *openEngine) queueLen() int64 { return e.abandoned + int64(e.queue.n) }

func (e *openEngine) inFlight() int64 {
	n := int64(e.queue.n) + int64(len(e.retries))
	if e.busy && e.svcLive {
		n++
	}
	return n
}

func (e *openEngine) errInFlight() error {
	return fmt.Errorf("%w: over %d attempts and calls in flight at once, %d bytes each, over MaxMemory %s: "+
		"the backlog outgrew the memory allowed (a client Timeout, a QueueLimit or a shorter Duration bounds it)",
		ErrScenario, e.maxInFlight, OpenBytesPerCall, byteSize(e.s.MaxMemory))
}

func (e *openEngine) run() error {
	for {
		if err := e.tick(e.lastT); err != nil {
			return err
		}
		tc, tt, tr := int64(never), int64(never), int64(never)
		if e.busy {
			tc = e.doneAt
		}
		if e.timeout > 0 {
			if e.busy && e.svcLive {
				tt = e.svc.t + e.timeout
			} else if e.queue.n > 0 {
				tt = e.queue.front().t + e.timeout
			}
		}
		if len(e.retries) > 0 {
			tr = e.retries[0].t
		}
		t := min(tc, tt, tr, e.nextArrival)
		if t >= e.end {
			break
		}
		e.lastT = t
		if k := int(t / e.slotW); k > e.cur {
			q := e.queueLen()
			for ; e.cur < k; e.cur++ {
				e.series[e.cur].Queue = q
			}
		}
		var err error
		switch t {
		case tc:
			e.complete(t)
		case tt:
			err = e.expire(t)
		case tr:
			c := e.popRetry()
			err = e.attemptAt(c, t)
		default:
			sl := e.slot(t)
			sl.Arrivals++
			c := call{start: t, c: int32(e.nArrived % int64(e.s.Processes))}
			e.nArrived++
			e.nextArrival = e.drawArrival()
			err = e.attemptAt(c, t)
		}
		if err != nil {
			return err
		}
	}
	q := e.queueLen()
	for ; e.cur < len(e.series); e.cur++ {
		e.series[e.cur].Queue = q
	}
	return nil
}

// tick counts one step (an event, or an attempt made at once); every few
// thousand it returns ctx's error, or an error once the run has simulated
// more than MaxWork attempts, and reports progress.
func (e *openEngine) tick(now int64) error {
	e.steps++
	if e.steps&0xfff == 0 {
		if err := e.ctx.Err(); err != nil {
			return err
		}
		if e.s.MaxWork > 0 && e.simulated > e.s.MaxWork {
			return fmt.Errorf("%w: simulated over MaxWork (%.3g) attempts", ErrScenario, e.s.MaxWork)
		}
		if e.s.Progress != nil && e.steps&0xfffff == 0 {
			e.s.Progress(time.Duration(min(now, e.end)), e.s.Duration)
		}
	}
	return nil
}

// complete ends the service of the request in service at t and starts the
// next one.
func (e *openEngine) complete(t int64) {
	sl := e.slot(t)
	sl.Served++
	if e.svcLive {
		sl.Goodput++
		e.succeeded++
		if e.throttle.on {
			e.throttle.record(e.svc.c, t, true)
		}
		if e.quota.on {
			e.quota.success(e.svc.c, e.svc.calls > 0)
		}
	} else {
		sl.Wasted++
	}
	e.startNext(t, true)
}

// startNext starts serving the head of the queue at now, if any: the
// requests whose clients left first (they are the oldest). chained says
// that the server has just finished one, at the work count e.target.
func (e *openEngine) startNext(now int64, chained bool) {
	switch {
	case e.abandoned > 0:
		e.abandoned--
		e.svcLive = false
	case e.queue.n > 0:
		e.svc = e.queue.pop()
		e.svcLive = true
	default:
		e.busy = false
		return
	}
	if !chained {
		e.target = e.work.at(now)
	}
	e.target++
	e.busy = true
	e.doneAt = max(e.work.when(e.target), now+1)
}

// expire handles the timeout at t of the oldest attempt whose client
// still waits.
func (e *openEngine) expire(t int64) error {
	var c call
	if e.busy && e.svcLive && e.svc.t+e.timeout == t {
		c = e.svc
		e.svcLive = false // the server finishes it anyway: wasted work
	} else {
		c = e.queue.pop()
		if !e.s.DropExpired {
			e.abandoned++
		}
	}
	if e.throttle.on {
		e.throttle.record(c.c, t, false)
	}
	return e.failed(c, t)
}

// attemptAt makes call c's next attempt at now and, if it fails at once
// (the throttle or a full queue), goes on as failed does.
func (e *openEngine) attemptAt(c call, now int64) error {
	ok, err := e.send(&c, now)
	if ok || err != nil {
		return err
	}
	return e.failed(c, now)
}

// send makes call c's next attempt at now, as retry.Do's attempt does:
// through the throttle, counting a first attempt with the budget, then to
// the server. It reports whether the attempt is in flight; false means it
// failed at once.
func (e *openEngine) send(c *call, now int64) (bool, error) {
	sl := e.slot(now)
	e.attempt++
	e.simulated++
	if e.throttle.on && !e.throttle.allow(c.c, now, e.rng) {
		sl.Throttled++
		return false, nil
	}
	if e.budget.on && c.calls == 0 {
		e.budget.first(c.c, now)
	}
	sl.Sent++
	if e.s.QueueLimit > 0 && e.queueLen() >= int64(e.s.QueueLimit) {
		sl.Rejected++
		if e.throttle.on {
			e.throttle.record(c.c, now, false)
		}
		return false, nil
	}
	c.t = now
	if !e.busy {
		e.svc, e.svcLive = *c, true
		e.startService(now)
	} else {
		e.queue.push(*c)
		e.peakQueue = max(e.peakQueue, e.queueLen())
	}
	return true, e.checkInFlight()
}

// startService starts serving e.svc on an idle server at now.
func (e *openEngine) startService(now int64) {
	e.busy = true
	e.target = e.work.at(now) + 1
	e.doneAt = max(e.work.when(e.target), now+1)
}

func (e *openEngine) checkInFlight() error {
	n := e.inFlight()
	e.peakInFlight = max(e.peakInFlight, n)
	if e.maxInFlight > 0 && n > e.maxInFlight {
		return e.errInFlight()
	}
	return nil
}

// failed applies the stop rules, the policy's wait and the budget after
// call c's attempt failed at now, as retry.Do does, and sends the next
// attempt at once for a zero wait, or schedules it.
func (e *openEngine) failed(c call, now int64) error {
	p := &e.s.Policy
	for {
		if c.calls < math.MaxInt32 {
			c.calls++
		}
		if !e.unlimited && c.calls >= e.maxAttempts {
			e.gaveUp++
			return nil
		}
		d := p.Delay(int(c.calls)-1, time.Duration(c.prev), e.rng)
		c.prev = int64(d)
		if p.MaxElapsed > 0 && d >= p.MaxElapsed-time.Duration(now-c.start) {
			e.gaveUp++
			return nil
		}
		if e.budget.on && !e.budget.allow(c.c, now) || e.quota.on && !e.quota.retry(c.c) {
			e.gaveUp++
			e.refused++
			return nil
		}
		if d > 0 {
			c.t = addSat(now, int64(d))
			e.pushRetry(c)
			return e.checkInFlight()
		}
		if e.s.QueueLimit > 0 && e.queueLen() >= int64(e.s.QueueLimit) && !e.throttle.on && !e.budget.on && !e.quota.on &&
			p.Initial == retry.Immediate {
			// Every attempt left meets the same full queue at this instant
			// (nothing else happens meanwhile): count them in one step.
			more := int64(e.maxAttempts - c.calls)
			sl := e.slot(now)
			sl.Sent += more
			sl.Rejected += more
			e.attempt += more
			e.gaveUp++
			return nil
		}
		if err := e.tick(now); err != nil { // a call may resend at one instant up to MaxAttempts times
			return err
		}
		ok, err := e.send(&c, now)
		if ok || err != nil {
			return err
		}
	}
}

// keepsUp reports whether the server admitted, from slot k to the end,
// fewer requests than it can serve in that time (at full rate: k is past
// the trigger), so that its queue is not growing.
func (e *openEngine) keepsUp(k int) bool {
	var admitted int64
	for _, x := range e.series[k:] {
		admitted += x.Sent - x.Rejected
	}
	span := float64(e.end - int64(k)*e.slotW)
	return float64(admitted) < e.s.ServiceRate*span/1e9
}

func (e *openEngine) pushRetry(c call) { pushEvent(&e.retries, c) }

func (e *openEngine) popRetry() call { return popEvent(&e.retries) }

// result computes the run's figures from its series.
func (e *openEngine) result() OpenResult {
	s := e.s
	r := OpenResult{Slot: s.Slot, Series: e.series, Succeeded: e.succeeded, GaveUp: e.gaveUp,
		BudgetRefused: e.refused, PeakQueue: e.peakQueue, PeakInFlight: e.peakInFlight,
		Processes: s.Processes, TriggerEnd: s.TriggerEnd()}
	scope := func(on, shared bool) string {
		switch {
		case on && shared:
			return "shared"
		case on:
			return "local"
		}
		return ""
	}
	r.Budget = scope(s.Budget != nil, s.SharedBudget)
	r.Throttle = scope(s.Throttle != nil, s.SharedThrottle)
	for _, x := range e.series {
		r.Total.Arrivals += x.Arrivals
		r.Total.Sent += x.Sent
		r.Total.Throttled += x.Throttled
		r.Total.Rejected += x.Rejected
		r.Total.Served += x.Served
		r.Total.Goodput += x.Goodput
		r.Total.Wasted += x.Wasted
	}
	n := len(e.series)
	r.Total.Queue = e.series[n-1].Queue

	// The final state: the last 20 % of the run, in whole slots.
	k0 := int(math.Floor(0.8 * float64(n)))
	span := time.Duration(e.end - int64(k0)*e.slotW).Seconds()
	var arr, sent, good int64
	for _, x := range e.series[k0:] {
		arr += x.Arrivals
		sent += x.Sent
		good += x.Goodput
	}
	r.ArrivalsPerSecond = float64(arr) / span
	r.OfferedPerSecond = float64(sent) / span
	r.GoodputPerSecond = float64(good) / span
	if arr > 0 {
		r.Amplification = float64(sent) / float64(arr)
	}

	// Recovery: the first slot r from the trigger's end after which every
	// window of w slots has goodput ≥ RecoveryShare × arrivals, with at
	// least tail slots left.
	slots := func(d time.Duration) int { return int((int64(d) + e.slotW - 1) / e.slotW) }
	w, tail, r0 := max(slots(RecoveryWindow), 1), max(slots(RecoveryTail), 1), slots(r.TriggerEnd)
	from := r0
	var ga, aa int64
	for u := n - 1; u >= r0; u-- { // windows [u, u+w), from the last one back
		ga += e.series[u].Goodput
		aa += e.series[u].Arrivals
		if u+w < n {
			ga -= e.series[u+w].Goodput
			aa -= e.series[u+w].Arrivals
		}
		if u+w > n {
			continue // not a whole window
		}
		if float64(ga) < RecoveryShare*float64(aa) {
			from = u + 1
			break
		}
	}
	if r0 > n-tail || r0+w > n {
		r.CannotTell = true
		return r
	}
	if from <= n-tail && e.keepsUp(from) {
		r.Recovered = true
		r.RecoveryTime = max(time.Duration(int64(from)*e.slotW)-r.TriggerEnd, 0)
	}
	return r
}
