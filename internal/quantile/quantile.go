// Package quantile keeps a quantile of the most recent samples in bounded
// memory: the rule of retry.Hedger's adaptive delay, shared with the
// simulator's model of it. Standard library only.
package quantile

import (
	"math"
	"slices"
)

// Window holds the last Size samples and the quantile of them, recomputed
// every Size/16 samples once WarmUp samples have been added (and at the
// first sample after the warm-up). The zero Window must be given its
// settings before the first Add. It is not safe for concurrent use.
type Window struct {
	Size     int     // samples kept; at least 1
	WarmUp   int     // samples before the first quantile
	Quantile float64 // in (0, 1)
	Floor    int64   // the least value Value returns once warmed up; at least 1 is returned anyway

	ring, scratch []int64
	count, since  int
	cur           int64
}

// Add records sample v and returns the current value: the quantile (at
// least Floor and 1), or 0 during the warm-up.
func (w *Window) Add(v int64) int64 {
	if w.ring == nil {
		w.ring = make([]int64, max(w.Size, 1))
	}
	size := len(w.ring)
	w.ring[w.count%size] = v
	w.count++
	w.since++
	if w.count >= w.WarmUp && (w.since >= max(size/16, 1) || w.cur == 0) {
		w.since = 0
		n := min(w.count, size)
		w.scratch = append(w.scratch[:0], w.ring[:n]...)
		slices.Sort(w.scratch)
		i := int(math.Ceil(w.Quantile*float64(n))) - 1
		w.cur = max(w.scratch[max(i, 0)], w.Floor, 1)
	}
	return w.cur
}

// Value returns the current value, 0 during the warm-up.
func (w *Window) Value() int64 { return w.cur }
