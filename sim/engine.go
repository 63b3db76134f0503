package sim

import (
	"context"
	"math"
	"math/rand/v2"
	"time"

	"github.com/retrykit/retry"
)

// event kinds
const (
	evRequest uint8 = iota // capacity: a request arrives at the server
	evRead                 // contention: a read arrives at the server
	evWrite                // contention: a write arrives at the server
)

// event is one entry of the queue: something happens to client c at time t
// (nanoseconds from the start of the trial).
// It carries the client's whole state, so that the queue is the only
// per-client memory touched (40 bytes).
type event struct {
	t     int64
	start int64 // time of the client's first call
	prev  int64 // previous wait, for decorrelated jitter
	c     int32 // client number (ties are broken by it)
	calls int32 // calls that failed so far
	ver   int32 // version read (contention)
	kind  uint8
}

func (a event) before(b event) bool { return a.t < b.t || a.t == b.t && a.c < b.c }

// state holds the flat slices reused across trials.
type state struct {
	s           *Scenario
	maxAttempts int
	heap        []event
	done        []int64 // success times of this trial
	load        []int
	finished    int64 // client runs finished over all trials (progress)
	rng         *rand.Rand
}

type trialResult struct {
	requests, succeeded, gaveUp int64
	peak                        int
	p50, p99, max               int64
}

func newState(s *Scenario) *state {
	ma := s.Policy.MaxAttempts
	if ma == 0 {
		ma = retry.DefaultMaxAttempts
	}
	return &state{
		s:           s,
		maxAttempts: ma,
		heap:        make([]event, 0, s.Clients),
		done:        make([]int64, 0, s.Clients),
	}
}

func addSat(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// latency draws one message delay |Normal(Latency, LatencySD)|.
func (st *state) latency() int64 {
	x := math.Abs(st.rng.NormFloat64()*float64(st.s.LatencySD) + float64(st.s.Latency))
	if x >= math.MaxInt64/4 {
		return math.MaxInt64 / 4
	}
	return int64(x)
}

// failed applies the stop rules and the policy's wait after client i's call
// failed with the response arriving at t. It returns when the client sends
// its next call, or ok false if it gives up.
func (st *state) failed(c *event, t int64, hint time.Duration) (next int64, ok bool) {
	c.calls++
	if st.maxAttempts != retry.Unlimited && int(c.calls) >= st.maxAttempts {
		return 0, false
	}
	p := &st.s.Policy
	d := p.Delay(int(c.calls)-1, time.Duration(c.prev), st.rng)
	c.prev = int64(d)
	if hint > d {
		d = hint
	}
	if p.MaxElapsed > 0 && d > p.MaxElapsed-time.Duration(t-c.start) {
		return 0, false
	}
	return addSat(t, int64(d)), true
}

func (st *state) push(e event) {
	h := append(st.heap, e)
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
	st.heap = h
}

func (st *state) pop() event {
	h := st.heap
	top := h[0]
	n := len(h) - 1
	last := h[n]
	h = h[:n]
	if n > 0 {
		siftDown(h, 0, last)
	}
	st.heap = h
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

// count adds one call arriving at t to the load series and returns its slot.
func (st *state) count(t int64) int64 {
	slot := t / int64(st.s.Slot)
	if slot < maxSlots {
		for int64(len(st.load)) <= slot {
			st.load = append(st.load, 0)
		}
		st.load[slot]++
	}
	return slot
}

// trial runs trial k.
func (st *state) trial(ctx context.Context, k uint64, _ bool) (trialResult, error) {
	s := st.s
	st.rng = rand.New(rand.NewPCG(s.Seed, k))
	st.heap = st.heap[:0]
	st.done = st.done[:0]
	st.load = st.load[:0]
	kind := evRequest
	if s.Model == Contention {
		kind = evRead
	}
	for i := range s.Clients {
		var start int64
		if s.StartWindow > 0 {
			start = st.rng.Int64N(int64(s.StartWindow))
		}
		t := start
		if kind == evRead {
			t += st.latency()
		}
		st.heap = append(st.heap, event{t: t, start: start, c: int32(i), kind: kind})
	}
	if s.Model == Capacity {
		return st.capacityTrial(ctx)
	}
	st.heapify()

	var (
		r       trialResult
		version int32
		total   = int64(s.Clients) * int64(s.Trials)
	)
	for steps := 0; len(st.heap) > 0; steps++ {
		if steps&0xfff == 0 {
			if err := ctx.Err(); err != nil {
				return r, err
			}
			if steps&0xffff == 0 && s.Progress != nil {
				s.Progress(st.finished, total)
			}
		}
		e := st.pop()
		switch e.kind {
		case evRead:
			e.ver = version
			e.t = addSat(e.t, st.latency()+st.latency())
			e.kind = evWrite
			st.push(e)
		case evWrite:
			r.requests++
			st.count(e.t)
			resp := addSat(e.t, st.latency())
			if e.ver == version {
				version++
				st.done = append(st.done, resp)
				st.finished++
				continue
			}
			if next, ok := st.failed(&e, resp, 0); ok {
				e.t = addSat(next, st.latency())
				e.kind = evRead
				st.push(e)
			} else {
				r.gaveUp++
				st.finished++
			}
		}
	}
	return st.finish(r), nil
}
