package main

import (
	"fmt"
	"image/color"
	"io"
	"time"

	"github.com/retrykit/retry/sim"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// newCanvas returns a w × h canvas for format ("png" or "svg") and the
// function that writes it.
func newCanvas(format string, w, h vg.Length) (vg.CanvasSizer, func(io.Writer) error) {
	if format == "svg" {
		c := vgsvg.New(w, h)
		return c, func(out io.Writer) error { _, err := c.WriteTo(out); return err }
	}
	c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(96))
	return c, func(out io.Writer) error { _, err := vgimg.PngCanvas{Canvas: c}.WriteTo(out); return err }
}

// drawTiles lays plots out in rows and writes them to w.
func drawTiles(w io.Writer, format string, plots [][]*plot.Plot, width, height vg.Length) error {
	c, write := newCanvas(format, width, height)
	dc := draw.New(c)
	t := draw.Tiles{Rows: len(plots), Cols: len(plots[0]), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 3,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 3}
	canvases := plot.Align(plots, t, dc)
	for i, row := range plots {
		for j, p := range row {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	if err := write(w); err != nil {
		return fmt.Errorf("simulate: plot: %w", err)
	}
	return nil
}

// shade adds a grey band over [a, b) from 0 to top.
func shade(p *plot.Plot, a, b, top float64) error {
	if b <= a || top <= 0 {
		return nil
	}
	poly, err := plotter.NewPolygon(plotter.XYs{{X: a, Y: 0}, {X: b, Y: 0}, {X: b, Y: top}, {X: a, Y: top}})
	if err != nil {
		return err
	}
	poly.Color = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	poly.LineStyle.Width = 0
	p.Add(poly)
	return nil
}

// writeOpenPlot draws offered load, goodput and queue length over time,
// one curve per strategy, with the trigger shaded and the arrival rate
// dashed.
func writeOpenPlot(w io.Writer, format, title string, s sim.OpenScenario, runs []openRun) error {
	type panel struct {
		label string
		value func(x sim.OpenSlot, secs float64) float64
	}
	panels := []panel{
		{"offered load (attempts/s)", func(x sim.OpenSlot, secs float64) float64 { return float64(x.Sent) / secs }},
		{"goodput (answered in time, /s)", func(x sim.OpenSlot, secs float64) float64 { return float64(x.Goodput) / secs }},
		{"server queue (requests)", func(x sim.OpenSlot, _ float64) float64 { return float64(x.Queue) }},
	}
	var plots [][]*plot.Plot
	for k, pn := range panels {
		p := plot.New()
		if k == 0 {
			p.Title.Text = title
		}
		p.Y.Label.Text = pn.label
		if k == len(panels)-1 {
			p.X.Label.Text = "time (s)"
		}
		top := 0.0
		var lines []*plotter.Line
		for i, r := range runs {
			secs := r.Result.Slot.Seconds()
			pts := make(plotter.XYs, len(r.Result.Series))
			for j, x := range r.Result.Series {
				pts[j].X, pts[j].Y = float64(j)*secs, pn.value(x, secs)
				top = max(top, pts[j].Y)
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return fmt.Errorf("simulate: plot: %w", err)
			}
			l.Color = strategyColors[i%len(strategyColors)]
			l.Width = vg.Points(1.2)
			lines = append(lines, l)
		}
		if k < 2 {
			top = max(top, s.Rate)
		}
		if s.TriggerFor > 0 {
			if err := shade(p, s.TriggerAt.Seconds(), (s.TriggerAt + s.TriggerFor).Seconds(), top*1.05); err != nil {
				return fmt.Errorf("simulate: plot: %w", err)
			}
		}
		p.Add(plotter.NewGrid())
		for i, l := range lines {
			p.Add(l)
			if k == 0 {
				p.Legend.Add(runs[i].Name, l)
			}
		}
		if k < 2 {
			end := s.Duration.Seconds()
			al, err := plotter.NewLine(plotter.XYs{{X: 0, Y: s.Rate}, {X: end, Y: s.Rate}})
			if err != nil {
				return fmt.Errorf("simulate: plot: %w", err)
			}
			al.Color = color.Black
			al.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(al)
			if k == 0 {
				p.Legend.Add(fmt.Sprintf("arrivals (%.0f/s)", s.Rate), al)
			}
		}
		p.Y.Min = 0
		p.X.Min, p.X.Max = 0, s.Duration.Seconds()
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.XOffs = vg.Points(6)
		p.Legend.TextStyle.Font.Size = vg.Points(9)
		plots = append(plots, []*plot.Plot{p})
	}
	return drawTiles(w, format, plots, 9*vg.Inch, 8*vg.Inch)
}

// Phase-diagram colours: stuck, recovered at once, recovered late, and
// cannot tell.
var (
	stuckColor   = color.RGBA{0xb2, 0x18, 0x2b, 0xff}
	unknownColor = color.RGBA{0xa0, 0xa0, 0xa0, 0xff}
	fastColor    = color.RGBA{0x1a, 0x98, 0x50, 0xff}
	slowColor    = color.RGBA{0xfe, 0xe0, 0x8b, 0xff}
)

// slowRecovery is the recovery time drawn in slowColor (and beyond).
const slowRecovery = 2 * time.Minute

func recoveryColor(r sim.OpenResult) color.RGBA {
	if r.CannotTell {
		return unknownColor
	}
	if !r.Recovered {
		return stuckColor
	}
	f := min(float64(r.RecoveryTime)/float64(slowRecovery), 1)
	mix := func(a, b uint8) uint8 { return uint8(float64(a) + f*(float64(b)-float64(a))) }
	return color.RGBA{mix(fastColor.R, slowColor.R), mix(fastColor.G, slowColor.G), mix(fastColor.B, slowColor.B), 0xff}
}

// writePhasePlot draws the phase diagram: one panel per strategy, each
// cell stuck (red), recovered (green at once, fading to yellow at
// slowRecovery and later) or cannot tell (grey).
func writePhasePlot(w io.Writer, format, title string, sw *sweep, g *sweepGrid) error {
	step := func(v []float64) float64 {
		if len(v) > 1 {
			return v[1] - v[0]
		}
		return 1
	}
	xs, ys := sw.axes[0].values, sw.axes[1].values
	dx, dy := step(xs), step(ys)
	cols := min(len(g.names), 2)
	var plots [][]*plot.Plot
	for k, name := range g.names {
		p := plot.New()
		p.Title.Text = name
		if k == 0 {
			p.Title.Text = title + ": " + name + "\nred: stuck; grey: cannot tell\ngreen: recovers at once, fading to yellow at 2 min+"
		}
		p.X.Label.Text, p.Y.Label.Text = axisLabel(sw.axes[0].name), axisLabel(sw.axes[1].name)
		for i, x := range xs {
			for j, y := range ys {
				poly, err := plotter.NewPolygon(plotter.XYs{{X: x - dx/2, Y: y - dy/2}, {X: x + dx/2, Y: y - dy/2},
					{X: x + dx/2, Y: y + dy/2}, {X: x - dx/2, Y: y + dy/2}})
				if err != nil {
					return fmt.Errorf("simulate: plot: %w", err)
				}
				poly.Color = recoveryColor(g.cells[k][i][j])
				poly.LineStyle.Color = color.White
				poly.LineStyle.Width = vg.Points(0.5)
				p.Add(poly)
			}
		}
		p.X.Min, p.X.Max = xs[0]-dx/2, xs[len(xs)-1]+dx/2
		p.Y.Min, p.Y.Max = ys[0]-dy/2, ys[len(ys)-1]+dy/2
		if k%cols == 0 {
			plots = append(plots, make([]*plot.Plot, cols))
		}
		plots[len(plots)-1][k%cols] = p
	}
	return drawTiles(w, format, plots, vg.Length(cols)*4.5*vg.Inch, vg.Length(len(plots))*4*vg.Inch)
}

func axisLabel(name string) string {
	switch name {
	case "trigger-capacity":
		return "capacity left during the trigger (fraction)"
	case "trigger-for":
		return "trigger length (s)"
	}
	return "arrivals per second"
}
