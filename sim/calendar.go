package sim

import "github.com/retrykit/retry"

// The capacity model's queue is a calendar: one list of events per slot
// that has any, and a min-heap of those slot numbers. A list is a chain of
// fixed chunks of chunkLen events taken from one pool, and every chunk goes
// back to the pool as soon as it has been read, so the queue never holds
// more than the pending events (one per client) plus one partly filled
// chunk per slot, and the run allocates nothing once the pool has grown to
// that size.
//
// A slot is processed without sorting it. Every request in it that arrives
// before the outage fails whatever the order; of the others the server
// accepts the first Capacity in (time, client) order, found by a bounded
// selection, and fails the rest. The failures are then handled in list
// order (the order in which the requests were scheduled), which decides
// only which random numbers each draws. A retry that lands in the slot
// being processed while it cannot succeed there (still in the outage, or
// after the slot's capacity was used) fails at once; one that lands after
// the outage, before the slot's capacity is settled, joins the slot.

const (
	minChunk   = 4   // events per chunk, at least
	maxChunk   = 256 // and at most
	blockShift = 16  // 1<<blockShift events are allocated together
	noChunk    = -1
)

// chunkLen returns the chunk length for n clients spread over about
// slots slots at a time: long chunks read faster, short ones waste less
// when each slot holds few events.
func chunkLen(n int64, slots float64) int {
	c := minChunk
	for c < maxChunk && float64(c)*4*slots < float64(n) {
		c *= 2
	}
	return c
}

// pool hands out chunks of clen events.
type pool struct {
	clen   int       // events per chunk, a power of two
	shift  uint      // log2 of the chunks per block
	blocks [][]event // each 1<<blockShift events
	next   []int32   // per chunk: the next chunk of its list, or of the free list
	free   int32     // head of the free list
	used   int32     // chunks ever handed out
}

func (p *pool) init(clen int) {
	*p = pool{clen: clen, free: noChunk}
	for 1<<(p.shift+1)*clen <= 1<<blockShift {
		p.shift++
	}
}

func (p *pool) chunk(id int32) []event {
	b := p.blocks[id>>p.shift]
	o := int(id&(1<<p.shift-1)) * p.clen
	return b[o : o+p.clen : o+p.clen]
}

func (p *pool) get() int32 {
	if id := p.free; id != noChunk {
		p.free = p.next[id]
		p.next[id] = noChunk
		return id
	}
	if int(p.used) == len(p.blocks)<<p.shift {
		p.blocks = append(p.blocks, make([]event, 1<<blockShift))
	}
	id := p.used
	p.used++
	p.next = append(p.next, noChunk)
	return id
}

func (p *pool) put(id int32) {
	p.next[id] = p.free
	p.free = id
}

// reset returns every chunk to the pool.
func (p *pool) reset() {
	p.free = noChunk
	for id := p.used - 1; id >= 0; id-- {
		p.put(id)
	}
}

// list is a chain of chunks; n counts its events.
type list struct {
	head, tail int32
	tailN      int32 // events in the tail chunk
	n          int64
}

func emptyList() list { return list{head: noChunk, tail: noChunk} }

func (p *pool) push(l *list, e event) {
	if l.tail == noChunk || int(l.tailN) == p.clen {
		id := p.get()
		if l.tail == noChunk {
			l.head = id
		} else {
			p.next[l.tail] = id
		}
		l.tail, l.tailN = id, 0
	}
	p.chunk(l.tail)[l.tailN] = e
	l.tailN++
	l.n++
}

// A list is read and given back chunk by chunk, in a plain loop (the hot
// path of the simulator):
//
//	for id := l.head; id != noChunk; id = p.release(id) {
//		for _, e := range p.events(&l, id) { ... }
//	}

// events returns the events of chunk id of l.
func (p *pool) events(l *list, id int32) []event {
	ch := p.chunk(id)
	if id == l.tail {
		return ch[:l.tailN]
	}
	return ch
}

// release gives chunk id back to the pool and returns the chunk that
// followed it in its list.
func (p *pool) release(id int32) int32 {
	nx := p.next[id]
	p.put(id)
	return nx
}

// calendar is the capacity model's queue.
type calendar struct {
	pool
	index map[int64]int32 // slot → its entry in lists
	lists []slotList
	spare []int32 // unused entries of lists
	keys  []int64 // min-heap of the slots in index
	cache [256]struct {
		slot int64
		i    int32 // entry + 1; 0 means empty
	}
}

type slotList struct {
	slot int64
	list
}

func (q *calendar) reset() {
	q.pool.reset()
	if q.index == nil {
		q.index = make(map[int64]int32)
	}
	clear(q.index)
	q.lists, q.spare, q.keys = q.lists[:0], q.spare[:0], q.keys[:0]
	q.cache = [256]struct {
		slot int64
		i    int32
	}{}
}

// add schedules e in slot.
func (q *calendar) add(slot int64, e event) {
	c := &q.cache[uint64(slot)%uint64(len(q.cache))]
	var i int32
	if c.i != 0 && c.slot == slot {
		i = c.i - 1
	} else if j, ok := q.index[slot]; ok {
		i = j
		c.slot, c.i = slot, i+1
	} else {
		if n := len(q.spare); n > 0 {
			i, q.spare = q.spare[n-1], q.spare[:n-1]
		} else {
			i = int32(len(q.lists))
			q.lists = append(q.lists, slotList{})
		}
		q.lists[i] = slotList{slot, emptyList()}
		q.index[slot] = i
		q.pushKey(slot)
		c.slot, c.i = slot, i+1
	}
	q.pool.push(&q.lists[i].list, e)
}

// take removes the earliest slot and returns it with its list.
func (q *calendar) take() (int64, list) {
	slot := q.popKey()
	i := q.index[slot]
	delete(q.index, slot)
	if c := &q.cache[uint64(slot)%uint64(len(q.cache))]; c.slot == slot {
		c.i = 0
	}
	q.spare = append(q.spare, i)
	return slot, q.lists[i].list
}

func (q *calendar) pushKey(k int64) {
	h := append(q.keys, k)
	j := len(h) - 1
	for j > 0 {
		p := (j - 1) / 2
		if h[p] <= k {
			break
		}
		h[j] = h[p]
		j = p
	}
	h[j] = k
	q.keys = h
}

func (q *calendar) popKey() int64 {
	h := q.keys
	top := h[0]
	n := len(h) - 1
	last := h[n]
	h = h[:n]
	j := 0
	for {
		l := 2*j + 1
		if l >= n {
			break
		}
		if r := l + 1; r < n && h[r] < h[l] {
			l = r
		}
		if h[l] >= last {
			break
		}
		h[j] = h[l]
		j = l
	}
	if n > 0 {
		h[j] = last
	}
	q.keys = h
	return top
}

// key orders requests within a slot: by time, then client.
func key(e *event) (int64, int32) { return e.t, e.c }

// after reports whether a arrives after b in (time, client) order.
func after(a, b *event) bool { return a.t > b.t || a.t == b.t && a.c > b.c }

// slotRun holds the counters of the slot being processed.
type slotRun struct {
	st        *state
	r         *trialResult
	slot, now int64 // the slot and its start, the budget's clock
	count     int64 // requests in the slot
	kept      list  // requests at or after the outage, and retries joining them
	zeroWaits bool
}

// fail handles a failed request of e at e.t; full says the slot accepts
// nothing more.
func (sr *slotRun) fail(e event, full bool) error {
	st := sr.st
	q := &st.q
	slotW := int64(st.s.Slot)
	for {
		next, stop := st.failed(&e, e.t, sr.now, st.s.RetryAfter)
		if stop != stopRetry {
			st.gaveUp(sr.r, stop)
			return nil
		}
		if next >= int64(MaxTime) {
			return errHorizon()
		}
		if ns := next / slotW; ns != sr.slot {
			e.t = next
			q.add(ns, e)
			return nil
		}
		e.t = next
		if next >= int64(st.s.Outage) && !full {
			q.push(&sr.kept, e)
			return nil
		}
		// It lands in this slot, where it fails again.
		if sr.zeroWaits {
			more := int64(st.maxAttempts - e.calls)
			sr.count = addSat(sr.count, more)
			sr.r.requests = addSat(sr.r.requests, more)
			sr.r.bulk = addSat(sr.r.bulk, more)
			st.gaveUp(sr.r, stopGaveUp)
			return nil
		}
		sr.count++
		sr.r.requests++
		if err := st.tick(); err != nil {
			return err
		}
	}
}

// outagePhase handles the requests of l that arrive before the outage
// ends: all fail. The others, and the retries that land after the outage
// in this slot, go to sr.kept.
func (sr *slotRun) outagePhase(l list) error {
	st := sr.st
	q := &st.q
	outage := int64(st.s.Outage)
	sr.kept = emptyList()
	for id := l.head; id != noChunk; id = q.release(id) {
		ch := q.events(&l, id)
		for i := range ch {
			e := ch[i]
			if err := st.tick(); err != nil {
				return err
			}
			if e.t >= outage {
				q.push(&sr.kept, e)
				continue
			}
			sr.count++
			sr.r.requests++
			st.sent(&e, sr.now)
			if err := sr.fail(e, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// servePhase handles the requests of l, all after the outage: the server
// accepts the first Capacity of them in (time, client) order. It keeps the
// requests accepted so far in a max-heap (st.sel); a request that comes
// after all of them when the heap is full fails at once, and one that
// comes before evicts the latest, which fails then.
func (sr *slotRun) servePhase(l list) error {
	st := sr.st
	q := &st.q
	if l.n <= int64(st.s.Capacity) { // all accepted
		for id := l.head; id != noChunk; id = q.release(id) {
			ch := q.events(&l, id)
			for i := range ch {
				if err := st.tick(); err != nil {
					return err
				}
				st.sent(&ch[i], sr.now)
				st.done = append(st.done, ch[i].t)
				st.finished++
			}
		}
		sr.count += l.n
		sr.r.requests += l.n
		return nil
	}
	capacity := st.s.Capacity
	h := st.sel[:0]
	for id := l.head; id != noChunk; id = q.release(id) {
		ch := q.events(&l, id)
		for i := range ch {
			e := ch[i]
			if err := st.tick(); err != nil {
				return err
			}
			sr.count++
			sr.r.requests++
			st.sent(&e, sr.now)
			if len(h) < capacity {
				h = append(h, e)
				for j := len(h) - 1; j > 0; { // sift up
					p := (j - 1) / 2
					if !after(&h[j], &h[p]) {
						break
					}
					h[p], h[j] = h[j], h[p]
					j = p
				}
				continue
			}
			if after(&e, &h[0]) {
				if err := sr.fail(e, true); err != nil {
					return err
				}
				continue
			}
			out := h[0]
			siftDownLatest(h, e)
			if err := sr.fail(out, true); err != nil {
				return err
			}
		}
	}
	for i := range h {
		st.done = append(st.done, h[i].t)
		st.finished++
	}
	st.sel = h
	return nil
}

// siftDownLatest replaces the root of the max-heap h (latest first) with e.
func siftDownLatest(h []event, e event) {
	n := len(h)
	j := 0
	for {
		l := 2*j + 1
		if l >= n {
			break
		}
		if r := l + 1; r < n && after(&h[r], &h[l]) {
			l = r
		}
		if !after(&h[l], &e) {
			break
		}
		h[j] = h[l]
		j = l
	}
	h[j] = e
}

// capacityTrial runs one trial of the capacity model.
func (st *state) capacityTrial() (trialResult, error) {
	s := st.s
	q := &st.q
	if q.clen == 0 {
		q.init(chunkLen(int64(s.Clients), s.activeSlots()))
	}
	q.reset()
	slotW := int64(s.Slot)
	for i := range s.Clients {
		var start int64
		if s.StartWindow > 0 {
			start = st.rng.Int64N(int64(s.StartWindow))
		}
		q.add(start/slotW, event{t: start, start: start, c: int32(i)})
	}
	var (
		r  = &st.res
		sc slotCounter
		sr = slotRun{st: st, r: r,
			// Every wait is zero: a refused client retries at the same
			// instant until MaxAttempts (finite, see resolve) stops it.
			zeroWaits: s.Policy.Initial == retry.Immediate && s.RetryAfter == 0 && !st.budget.on}
	)
	for len(q.keys) > 0 {
		slot, l := q.take()
		sr.slot, sr.now, sr.count = slot, slot*slotW, 0
		if sr.now < int64(s.Outage) {
			if err := sr.outagePhase(l); err != nil {
				return *r, err
			}
			l = sr.kept
		}
		if l.n > 0 {
			if err := sr.servePhase(l); err != nil {
				return *r, err
			}
		}
		sc.add(st, slot, sr.count)
	}
	sc.flush(st)
	r.peak = sc.peak
	return st.finish(*r), nil
}
