package sim

import (
	"math/rand/v2"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/defaults"
)

// throttleModel is retry.Throttle in virtual time: per window (one per
// process, or one for the fleet), the requests (attempts sent, and with
// CountRejected attempts rejected locally) and the accepts of each of the
// last windowSlots slots of Window/windowSlots. It reuses budgetWindow,
// whose first counts hold the requests and whose retry counts hold the
// accepts.
type throttleModel struct {
	on       bool
	k, maxP  float64
	countRej bool
	windows
}

func (t *throttleModel) init(c retry.ThrottleConfig, processes int, shared bool) {
	k, win := c.K, c.Window
	if k == 0 {
		k = defaults.ThrottleK
	}
	if win == 0 {
		win = defaults.ThrottleWindow
	}
	maxP := c.MaxProbability
	if maxP == 0 {
		maxP = defaults.ThrottleMaxProbability
	}
	t.on, t.k, t.maxP, t.countRej = true, k, maxP, c.CountRejected
	t.windows.init(win, processes, shared)
}

// probability is retry.Throttle's rejection probability for the counts of
// w: min(MaxProbability, max(0, (requests − K × accepts) / (requests + 1))).
func (t *throttleModel) probability(w *budgetWindow) float64 {
	excess := float64(w.sumF) - t.k*float64(w.sumR)
	if excess <= 0 {
		return 0
	}
	return min(excess/float64(w.sumF+1), t.maxP)
}

// allow reports whether process p may send an attempt at now, drawing
// from rng only while the rejection probability is above zero, as
// retry.Throttle does; with CountRejected a rejected attempt counts as a
// request at once.
func (t *throttleModel) allow(p int32, now int64, rng *rand.Rand) bool {
	w := t.window(p, now)
	pr := t.probability(w)
	if pr <= 0 || rng.Float64() >= pr {
		return true
	}
	if t.countRej {
		w.first[w.head%windowSlots]++
		w.sumF++
	}
	return false
}

// record counts the outcome, at now, of an attempt that allow let through.
func (t *throttleModel) record(p int32, now int64, accepted bool) {
	w := t.window(p, now)
	i := w.head % windowSlots
	w.first[i]++
	w.sumF++
	if accepted {
		w.retry[i]++
		w.sumR++
	}
}
