package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/retrykit/retry/sim"
)

// sweep is a phase diagram: a grid of two parameters.
type sweep struct {
	axes [2]sweepAxis
}

type sweepAxis struct {
	name   string
	values []float64 // seconds for trigger-for
}

// maxSweepCells bounds the grid of --sweep (per strategy).
const maxSweepCells = 4096

// sweepWorkFactor is how many single runs' work (--max-work, by default
// sim.DefaultMaxWork) all the cells of a sweep may make together.
const sweepWorkFactor = 10

// parseSweep reads --sweep: two axes NAME=LO:HI:STEP separated by a comma.
func parseSweep(spec string) (*sweep, error) {
	bad := func(format string, a ...any) error {
		return usagef("simulate: --sweep %q: "+format, append([]any{spec}, a...)...)
	}
	parts := strings.Split(spec, ",")
	if len(parts) != 2 {
		return nil, bad("want two axes, as trigger-capacity=0.3:0.7:0.05,trigger-for=2s:20s:2s")
	}
	sw := &sweep{}
	for i, p := range parts {
		name, rng, ok := strings.Cut(strings.TrimSpace(p), "=")
		lohi := strings.Split(rng, ":")
		if !ok || len(lohi) != 3 {
			return nil, bad("axis %q: want NAME=LO:HI:STEP", p)
		}
		parse := func(s string) (float64, error) {
			if name == "trigger-for" {
				d, err := time.ParseDuration(s)
				return d.Seconds(), err
			}
			return strconv.ParseFloat(s, 64)
		}
		switch name {
		case "trigger-capacity", "trigger-for", "rate":
		default:
			return nil, bad("unknown axis %q (want trigger-capacity, trigger-for or rate)", name)
		}
		if i == 1 && name == sw.axes[0].name {
			return nil, bad("axis %s given twice", name)
		}
		var v [3]float64
		for j, s := range lohi {
			x, err := parse(s)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
				return nil, bad("axis %s: %q is not a non-negative number or duration", name, s)
			}
			v[j] = x
		}
		lo, hi, step := v[0], v[1], v[2]
		if hi < lo || step <= 0 {
			return nil, bad("axis %s: want LO ≤ HI and a positive STEP", name)
		}
		n := math.Floor((hi-lo)/step+1e-9) + 1
		if n*float64(max(len(sw.axes[0].values), 1)) > maxSweepCells {
			return nil, bad("over %d cells", maxSweepCells)
		}
		ax := sweepAxis{name: name}
		for k := 0; k < int(n); k++ {
			v := math.Round((lo+float64(k)*step)*1e9) / 1e9 // no 0.30000000000000004
			if k > 0 && !(v > ax.values[k-1]) {
				return nil, bad("axis %s: STEP %v is too small for values near %v", name, step, v)
			}
			ax.values = append(ax.values, v)
		}
		sw.axes[i] = ax
	}
	return sw, nil
}

// apply sets the axes' values of cell (i, j) in s.
func (sw *sweep) apply(s sim.OpenScenario, i, j int) sim.OpenScenario {
	for a, k := range []int{i, j} {
		v := sw.axes[a].values[k]
		switch sw.axes[a].name {
		case "trigger-capacity":
			s.TriggerCapacity = v
		case "trigger-for":
			s.TriggerFor = time.Duration(math.Round(v * 1e9))
		case "rate":
			s.Rate = v
		}
	}
	return s
}

// validate checks every cell of the grid for s before any runs, and
// returns the work they estimate together (sim.OpenScenario.Work).
func (sw *sweep) validate(s sim.OpenScenario) (float64, error) {
	var work float64
	for i := range sw.axes[0].values {
		for j := range sw.axes[1].values {
			c := sw.apply(s, i, j)
			if err := c.Validate(); err != nil {
				return 0, usageError{fmt.Errorf("%s (--sweep cell %s=%g, %s=%g)", openFlags.Replace(err.Error()),
					sw.axes[0].name, sw.axes[0].values[i], sw.axes[1].name, sw.axes[1].values[j])}
			}
			work += c.Work()
		}
	}
	return work, nil
}

// checkWork refuses a sweep whose cells together would simulate more
// than sweepWorkFactor times a single run's limit.
func checkSweepWork(work, maxWork float64) error {
	if maxWork < 0 {
		return nil
	}
	limit := sweepWorkFactor * cmp.Or(maxWork, sim.DefaultMaxWork)
	if work > limit {
		return usagef("simulate: --sweep: its cells would simulate about %.3g attempts together, over %.3g (%d × --max-work): "+
			"fewer cells or strategies, a shorter --duration, or a larger --max-work", work, limit, sweepWorkFactor)
	}
	return nil
}

// sweepGrid holds, per strategy, the result of each cell: cells[k][i][j].
type sweepGrid struct {
	names []string
	cells [][][]sim.OpenResult
}

// run runs every cell of the grid for every strategy, on as many
// goroutines as GOMAXPROCS (each run is deterministic, so the grid is the
// same whatever the order). Only the summary of each run is kept. The
// cells share the memory limit: with P goroutines each runs with 1/P of
// it, and a cell that outgrows its share runs again afterwards, alone,
// with the whole limit. done, if not nil, is called after each cell.
func (sw *sweep) run(ctx context.Context, names []string, scs []sim.OpenScenario, done func(n, total int)) (*sweepGrid, error) {
	g := &sweepGrid{names: names, cells: make([][][]sim.OpenResult, len(scs))}
	type job struct{ k, i, j int }
	var jobs []job
	for k := range scs {
		g.cells[k] = make([][]sim.OpenResult, len(sw.axes[0].values))
		for i := range sw.axes[0].values {
			g.cells[k][i] = make([]sim.OpenResult, len(sw.axes[1].values))
			for j := range sw.axes[1].values {
				jobs = append(jobs, job{k, i, j})
			}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		next     int
		first    error
		wg       sync.WaitGroup
		finished int
		again    []job // cells that outgrew their share of the memory
	)
	par := runtime.GOMAXPROCS(0)
	share := func(s sim.OpenScenario) sim.OpenScenario {
		limit := cmp.Or(s.MaxMemory, sim.DefaultMaxMemory)
		if limit > 0 && par > 1 {
			s.MaxMemory = max(limit/int64(par), 1)
		}
		return s
	}
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if next == len(jobs) || first != nil {
					mu.Unlock()
					return
				}
				jb := jobs[next]
				next++
				mu.Unlock()
				r, err := sim.RunOpen(ctx, share(sw.apply(scs[jb.k], jb.i, jb.j)))
				r.Series = nil
				mu.Lock()
				switch {
				case err != nil && par > 1 && errors.Is(err, sim.ErrScenario) && strings.Contains(err.Error(), "MaxMemory"):
					again = append(again, jb)
				case err != nil && first == nil:
					first = err
					cancel()
				case err == nil:
					g.cells[jb.k][jb.i][jb.j] = r
					finished++
					if done != nil {
						done(finished, len(jobs))
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return g, first
	}
	for _, jb := range again {
		debug.FreeOSMemory() // the run alone has the whole limit
		r, err := sim.RunOpen(ctx, sw.apply(scs[jb.k], jb.i, jb.j))
		if err != nil {
			return g, err
		}
		r.Series = nil
		g.cells[jb.k][jb.i][jb.j] = r
		finished++
		if done != nil {
			done(finished, len(jobs))
		}
	}
	return g, nil
}

type sweepJSON struct {
	Strategy         string   `json:"strategy"`
	X                string   `json:"x"`
	XValue           float64  `json:"x_value"`
	Y                string   `json:"y"`
	YValue           float64  `json:"y_value"`
	Recovered        *bool    `json:"recovered"` // null: cannot tell
	RecoverySeconds  *float64 `json:"recovery_seconds"`
	OfferedPerSecond float64  `json:"offered_per_second"`
	GoodputPerSecond float64  `json:"goodput_per_second"`
}

func writeSweepJSON(w io.Writer, sw *sweep, g *sweepGrid) error {
	var rows []sweepJSON
	for k, name := range g.names {
		for i, x := range sw.axes[0].values {
			for j, y := range sw.axes[1].values {
				r := g.cells[k][i][j]
				rows = append(rows, sweepJSON{name, sw.axes[0].name, x, sw.axes[1].name, y, recovered(r), recoverySeconds(r),
					round3(r.OfferedPerSecond), round3(r.GoodputPerSecond)})
			}
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

// writeSweepTable prints one grid per strategy: rows are the second axis
// (from its top value down), columns the first; each cell the recovery
// time in seconds, "stuck", or "?" where the run cannot tell.
func writeSweepTable(w io.Writer, sw *sweep, g *sweepGrid) error {
	for k, name := range g.names {
		if k > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s: recovery time (s), stuck, or ? (cannot tell); columns %s, rows %s\n", name, sw.axes[0].name, sw.axes[1].name)
		tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "\t")
		for _, x := range sw.axes[0].values {
			fmt.Fprintf(tw, "%g\t", x)
		}
		fmt.Fprintln(tw)
		for j := len(sw.axes[1].values) - 1; j >= 0; j-- {
			fmt.Fprintf(tw, "%g\t", sw.axes[1].values[j])
			for i := range sw.axes[0].values {
				r := g.cells[k][i][j]
				switch {
				case r.CannotTell:
					fmt.Fprint(tw, "?\t")
				case r.Recovered:
					fmt.Fprintf(tw, "%.0f\t", r.RecoveryTime.Seconds())
				default:
					fmt.Fprint(tw, "stuck\t")
				}
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
