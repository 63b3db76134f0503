package sim

import (
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/defaults"
)

// budgetModel is retry.Budget in virtual time: per window (one per process,
// or one for the fleet), the first attempts and the retries granted in each
// of the last windowSlots slots of Window/windowSlots.
type budgetModel struct {
	on      bool
	ratio   float64
	reserve float64 // MinPerSecond × Window
	windows
}

// windows are the sliding windows of a budget or throttle model: one per
// process, or one shared by the fleet.
type windows struct {
	shared bool
	sub    int64 // Window / windowSlots, in ns
	wins   []budgetWindow
}

func (ws *windows) init(win time.Duration, processes int, shared bool) {
	ws.shared = shared
	ws.sub = max(int64(win/windowSlots), 1)
	if shared {
		processes = 1
	}
	ws.wins = make([]budgetWindow, processes)
}

func (ws *windows) reset() { clear(ws.wins) }

// window returns the window of client (or process) c, advanced to
// virtual time now (which never goes back for one window).
func (ws *windows) window(c int32, now int64) *budgetWindow {
	w := &ws.wins[0]
	if !ws.shared {
		w = &ws.wins[int(c)%len(ws.wins)]
	}
	w.advance(now / ws.sub)
	return w
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
		ratio = defaults.BudgetRatio
	}
	if floor == 0 {
		floor = defaults.BudgetMinPerSecond
	}
	if win == 0 {
		win = defaults.BudgetWindow
	}
	b.on = true
	b.ratio, b.reserve = max(ratio, 0), max(floor, 0)*win.Seconds()
	b.windows.init(win, processes, shared)
}

// advance moves w to slot k, forgetting the slots that leave the window;
// a k at or before w.head changes nothing.
func (w *budgetWindow) advance(k int64) {
	if k <= w.head {
		return
	}
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
