package sim

import (
	"cmp"
	"context"
	"math"
	"slices"
)

// The capacity model's queue is a calendar: one unsorted bucket of events
// per slot that has any, and a min-heap of the slot numbers. A bucket is
// sorted when its slot comes up and read in order; the few events that a
// short wait puts back into the slot being processed go to the small
// binary heap st.heap and are merged in. Events leave in exactly (time,
// client) order, as from a single heap, at a fraction of the cache misses.

func cmpEvent(a, b event) int {
	if c := cmp.Compare(a.t, b.t); c != 0 {
		return c
	}
	return cmp.Compare(a.c, b.c)
}

type calendar struct {
	buckets map[int64][]event
	keys    []int64 // min-heap of the keys of buckets
	free    [][]event
}

func (q *calendar) add(slot int64, e event) {
	b, ok := q.buckets[slot]
	if !ok {
		if n := len(q.free); n > 0 {
			b, q.free = q.free[n-1][:0], q.free[:n-1]
		}
		q.pushKey(slot)
	}
	q.buckets[slot] = append(b, e)
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

// capacityTrial runs one trial of the capacity model; st.heap holds the
// clients' first requests (unordered).
func (st *state) capacityTrial(ctx context.Context) (trialResult, error) {
	s := st.s
	slotW := int64(s.Slot)
	slotOf := func(t int64) int64 { return t / slotW }
	q := calendar{buckets: make(map[int64][]event)}
	first := st.heap
	for _, e := range first {
		q.add(slotOf(e.t), e)
	}
	st.heap = first[:0]

	var (
		r      trialResult
		total  = int64(s.Clients) * int64(s.Trials)
		outage = int64(s.Outage)
		steps  int
	)
	for len(q.keys) > 0 {
		slot := q.popKey()
		b := q.buckets[slot]
		delete(q.buckets, slot)
		slices.SortFunc(b, cmpEvent)
		accepted := 0
		idx := 0
		for idx < len(b) || len(st.heap) > 0 {
			steps++
			if steps&0xfff == 0 {
				if err := ctx.Err(); err != nil {
					return r, err
				}
				if steps&0xffff == 0 && s.Progress != nil {
					s.Progress(st.finished, total)
				}
			}
			var e event
			if idx < len(b) && (len(st.heap) == 0 || b[idx].before(st.heap[0])) {
				e = b[idx]
				idx++
			} else {
				e = st.pop()
			}
			r.requests++
			if slot < maxSlots {
				for int64(len(st.load)) <= slot {
					st.load = append(st.load, 0)
				}
				st.load[slot]++
			}
			if e.t >= outage && accepted < s.Capacity {
				accepted++
				st.done = append(st.done, e.t)
				st.finished++
				continue
			}
			next, ok := st.failed(&e, e.t, s.RetryAfter)
			if !ok {
				r.gaveUp++
				st.finished++
				continue
			}
			e.t = next
			if ns := slotOf(next); ns == slot {
				st.push(e)
			} else {
				q.add(ns, e)
			}
		}
		q.free = append(q.free, b)
	}
	return st.finish(r), nil
}

// finish fills in the per-trial statistics from st.done and st.load.
func (st *state) finish(r trialResult) trialResult {
	if st.s.Progress != nil {
		st.s.Progress(st.finished, int64(st.s.Clients)*int64(st.s.Trials))
	}
	r.succeeded = int64(len(st.done))
	for _, n := range st.load {
		r.peak = max(r.peak, n)
	}
	if n := len(st.done); n > 0 {
		slices.Sort(st.done)
		rank := func(q float64) int64 { return st.done[max(int(math.Ceil(q*float64(n)))-1, 0)] }
		r.p50, r.p99, r.max = rank(0.5), rank(0.99), st.done[n-1]
	}
	return r
}
