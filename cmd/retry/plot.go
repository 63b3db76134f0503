package main

import (
	"bufio"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// checkPlotExt accepts the plot formats written by --out.
func checkPlotExt(path string) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png", ".svg":
		return nil
	}
	return fmt.Errorf("simulate: --out %q: want a .png or .svg file", path)
}

// strategyColors are distinct, colour-blind-friendly line colours.
var strategyColors = []color.RGBA{
	{0xd5, 0x5e, 0x00, 0xff}, // vermilion
	{0x00, 0x72, 0xb2, 0xff}, // blue
	{0x00, 0x9e, 0x73, 0xff}, // green
	{0xcc, 0x79, 0xa7, 0xff}, // purple
	{0xe6, 0x9f, 0x00, 0xff}, // orange
	{0x56, 0xb4, 0xe9, 0xff}, // sky blue
}

// plotBuckets bounds the points drawn per strategy: a longer load series
// (up to 2^20 slots) is drawn as the lowest and the highest value of each
// of plotBuckets runs of slots, which keeps its peaks and its envelope at
// a fixed cost (drawing a million points takes gigabytes).
const plotBuckets = 2048

// plotPoints returns the points drawn for load: every slot, or for a long
// series the minimum and the maximum of each bucket, in time order.
func plotPoints(load []int, slot time.Duration, logY bool) plotter.XYs {
	y := func(n int) float64 {
		if logY {
			return max(float64(n), 1)
		}
		return float64(n)
	}
	if len(load) <= 2*plotBuckets {
		pts := make(plotter.XYs, len(load))
		for k, n := range load {
			pts[k].X, pts[k].Y = float64(k)*slot.Seconds(), y(n)
		}
		return pts
	}
	size := (len(load) + plotBuckets - 1) / plotBuckets
	pts := make(plotter.XYs, 0, 2*plotBuckets)
	for lo := 0; lo < len(load); lo += size {
		hi := min(lo+size, len(load))
		kmin, kmax := lo, lo
		for k := lo; k < hi; k++ {
			if load[k] < load[kmin] {
				kmin = k
			}
			if load[k] > load[kmax] {
				kmax = k
			}
		}
		for _, k := range []int{min(kmin, kmax), max(kmin, kmax)} {
			pts = append(pts, plotter.XY{X: float64(k) * slot.Seconds(), Y: y(load[k])})
		}
	}
	return pts
}

// writePlot draws requests per slot for each strategy on one chart, with
// the capacity as a dashed line, as PNG or SVG by path's extension.
func writePlot(path, title string, res []strategyResult) error {
	if err := checkPlotExt(path); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("simulate: plot: %w", err)
	}
	if err := writePlotTo(f, plotFormat(path), title, res); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("simulate: plot: %w", err)
	}
	return nil
}

// plotFormat is the image format for path's extension: "png" or "svg".
func plotFormat(path string) string {
	return strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
}

// writePlotTo is writePlot to w, in format ("png" or "svg").
func writePlotTo(w io.Writer, format, title string, res []strategyResult) error {
	p, err := newPlot(title, res)
	if err != nil {
		return err
	}
	wt, err := p.WriterTo(9*vg.Inch, 4.5*vg.Inch, format)
	if err != nil {
		return fmt.Errorf("simulate: plot: %w", err)
	}
	if _, err := wt.WriteTo(w); err != nil {
		return fmt.Errorf("simulate: plot: %w", err)
	}
	return nil
}

// newPlot draws the chart of writePlot.
func newPlot(title string, res []strategyResult) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	slot := res[0].Result.Slot
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = fmt.Sprintf("requests per %v", slot)
	p.Add(plotter.NewGrid())
	longest := 0
	logY := peakOver(res, 20)
	for i, r := range res {
		load := r.Result.Load
		longest = max(longest, len(load))
		pts := plotPoints(load, slot, logY)
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, fmt.Errorf("simulate: plot: %w", err)
		}
		l.Color = strategyColors[i%len(strategyColors)]
		l.Width = vg.Points(1.2)
		p.Add(l)
		p.Legend.Add(r.Name, l)
	}
	if c := res[0].Result.Capacity; c > 0 && longest > 0 {
		cl, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(c)}, {X: float64(longest) * slot.Seconds(), Y: float64(c)}})
		if err != nil {
			return nil, fmt.Errorf("simulate: plot: %w", err)
		}
		cl.Color = color.Black
		cl.Width = vg.Points(1)
		cl.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(cl)
		p.Legend.Add(fmt.Sprintf("capacity (%d)", c), cl)
	}
	// A herd is 10-100x capacity while a well-spread retry load sits near
	// it: a log scale shows both. Empty slots are drawn at 1, the bottom.
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Label.Text += " (log scale)"
		p.Y.Min = 1
	} else {
		p.Y.Min = 0
	}
	// The axis ends above the highest point (p.Y.Max, from the data), at a
	// labelled value, so that no curve runs along the top edge, clipped.
	p.Y.Max, p.Y.Tick.Marker = yAxis(p.Y.Max, logY)
	p.Legend.Top = true
	p.Legend.XOffs = -vg.Points(6)
	p.Legend.TextStyle.Font.Size = vg.Points(11)
	p.Legend.Padding = vg.Points(2)
	return p, nil
}

// yAxis returns the top of a y axis whose highest point is peak, and its
// ticks: on a log scale the next power of ten above the peak, where
// LogTicks puts its labels; on a linear one the first multiple of a round
// step (1, 2 or 5 times a power of ten, at least 1: requests are whole) at
// least 5 % above the peak, with a label at every step.
func yAxis(peak float64, logY bool) (float64, plot.Ticker) {
	if logY {
		return math.Pow(10, math.Floor(math.Log10(max(peak, 1)))+1), plot.LogTicks{Prec: -1}
	}
	peak = max(peak, 1)
	step := math.Pow(10, math.Floor(math.Log10(peak)))
	for _, f := range []float64{0.1, 0.2, 0.5} {
		if peak/(step*f) <= 10 {
			step *= f
			break
		}
	}
	step = max(step, 1)
	top := math.Ceil(peak*1.05/step) * step
	var ticks plot.ConstantTicks
	for i := 0.0; i*step <= top; i++ {
		ticks = append(ticks, plot.Tick{Value: i * step, Label: strconv.FormatFloat(i*step, 'f', 0, 64)})
	}
	return top, ticks
}

// peakOver reports whether some strategy's load exceeds f times the
// capacity (or 1000 in the contention model).
func peakOver(res []strategyResult, f float64) bool {
	limit := 1000.0
	if c := res[0].Result.Capacity; c > 0 {
		limit = f * float64(c)
	}
	for _, r := range res {
		for _, n := range r.Result.Load {
			if float64(n) > limit {
				return true
			}
		}
	}
	return false
}

// writeCSV writes one row per slot: the start of the slot in seconds,
// the capacity (empty for the contention model), then requests per slot for
// each strategy (0 after a strategy's last request).
func writeCSV(f io.Writer, res []strategyResult) error {
	w := bufio.NewWriter(f)
	w.WriteString("time_s,capacity")
	longest := 0
	for _, r := range res {
		w.WriteString("," + r.Name)
		longest = max(longest, len(r.Result.Load))
	}
	w.WriteString("\n")
	slot := res[0].Result.Slot
	capacity := ""
	if c := res[0].Result.Capacity; c > 0 {
		capacity = strconv.Itoa(c)
	}
	for k := range longest {
		w.WriteString(strconv.FormatFloat(float64(k)*slot.Seconds(), 'f', -1, 64))
		w.WriteString("," + capacity)
		for _, r := range res {
			n := 0
			if k < len(r.Result.Load) {
				n = r.Result.Load[k]
			}
			w.WriteString("," + strconv.Itoa(n))
		}
		w.WriteString("\n")
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	return nil
}
