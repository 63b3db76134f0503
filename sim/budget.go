package sim

import "github.com/retrykit/retry"

// budgetModel is retry.Budget in virtual time: per window (one per process,
// or one for the fleet), the first attempts and the retries granted in each
// of the last windowSlots slots of Window/windowSlots.
type budgetModel struct {
	on      bool
	shared  bool
	ratio   float64
	reserve float64 // MinPerSecond × Window
	sub     int64   // Window / windowSlots, in ns
	wins    []budgetWindow
}

const windowSlots = 10 // as retry.Budget keeps its window

type budgetWindow struct {
	head         int64 // the latest slot observed
	first, retry [windowSlots]int64
	sumF, sumR   int64 // over the live slots
}

func (b *budgetModel) init(c retry.BudgetConfig, processes int, shared bool) {
	ratio, floor, win := c.Ratio, c.MinPerSecond, c.Window
	if ratio == 0 {
		ratio = retry.DefaultBudgetRatio
	}
	if floor == 0 {
		floor = retry.DefaultBudgetMinPerSecond
	}
	if win == 0 {
		win = retry.DefaultBudgetWindow
	}
	b.on, b.shared = true, shared
	b.ratio, b.reserve = max(ratio, 0), max(floor, 0)*win.Seconds()
	b.sub = max(int64(win/windowSlots), 1)
	if shared {
		processes = 1
	}
	b.wins = make([]budgetWindow, processes)
}

func (b *budgetModel) reset() { clear(b.wins) }

// window returns client c's window, advanced to virtual time now (which
// never goes back for one window).
func (b *budgetModel) window(c int32, now int64) *budgetWindow {
	w := &b.wins[0]
	if !b.shared {
		w = &b.wins[int(c)%len(b.wins)]
	}
	k := now / b.sub
	if k > w.head {
		if k-w.head >= windowSlots {
			*w = budgetWindow{}
		} else {
			for j := w.head + 1; j <= k; j++ {
				i := j % windowSlots
				w.sumF -= w.first[i]
				w.sumR -= w.retry[i]
				w.first[i], w.retry[i] = 0, 0
			}
		}
		w.head = k
	}
	return w
}

// first counts a first attempt of client c at now.
func (b *budgetModel) first(c int32, now int64) {
	w := b.window(c, now)
	w.first[w.head%windowSlots]++
	w.sumF++
}

// allow reports whether client c may retry at now and, if so, counts the
// retry, by retry.Budget's rule.
func (b *budgetModel) allow(c int32, now int64) bool {
	w := b.window(c, now)
	if b.reserve+b.ratio*float64(w.sumF)-float64(w.sumR) < 1 {
		return false
	}
	w.retry[w.head%windowSlots]++
	w.sumR++
	return true
}
