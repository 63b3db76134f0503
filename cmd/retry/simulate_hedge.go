package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/defaults"
	"github.com/retrykit/retry/sim"
	"github.com/spf13/cobra"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// hedgeOptions holds the flags of `retry simulate hedge`.
type hedgeOptions struct {
	requests, copies, warmUp, samples       int
	rate, sigma, stragglers, factor, tail   float64
	correlated, slowFactor                  float64
	mean, tailLatency, slowPeriod, minDelay time.Duration
	quantiles, budget, format, out          string
	maxMemory                               string
	budgetRatio, budgetFloor                float64
	budgetWindow                            time.Duration
	seed                                    uint64
}

func newSimulateHedgeCmd() *cobra.Command {
	o := &hedgeOptions{}
	cmd := &cobra.Command{
		Use:   "hedge",
		Short: "Simulate hedged requests: tail latency against extra load",
		Long: `hedge runs the sim package's hedging model (sim.HedgeCurve): --requests requests arriving at
--rate per second, each copy's latency lognormal (--mean, --sigma) with --stragglers slowed by
--straggler-factor and a --tail of copies taking --tail-latency; with --correlated, that fraction of
--slow-period periods slows every copy sent in them by --slow-factor (a slow-everything outage at 1).
It prints one row without hedging, then one per quantile of --quantiles with a fixed delay at that
quantile of the unhedged latencies outside slow periods (tuned on a healthy system) and with an
adaptive delay at that quantile, each again with a
retry budget (--budget shared, the default) that every copy beyond the first draws on: p50, p95,
p99, p99.9 and the extra requests sent. With --out it also draws p99.9 and p99 against the extra
requests (.png or .svg), one line per rule through its quantiles.`,
		Example: `  retry simulate hedge --tail 0.01 --tail-latency 1s --out curve.png
  retry simulate hedge --stragglers 0.05 --straggler-factor 10 --quantiles 0.9,0.95
  retry simulate hedge --correlated 1 --quantiles 0.9 --copies 2`,
		Args:          noArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSimulateHedge(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.requests, "requests", sim.DefaultHedgeRequests, "requests sent")
	f.Float64Var(&o.rate, "rate", sim.DefaultHedgeRate, "requests per second, evenly spaced")
	f.DurationVar(&o.mean, "mean", sim.DefaultLatencyMean, "mean of the lognormal latency of a copy")
	f.Float64Var(&o.sigma, "sigma", sim.DefaultLatencySigma, "shape of the lognormal (negative: every copy takes --mean)")
	f.Float64Var(&o.stragglers, "stragglers", 0, "fraction of copies slowed by --straggler-factor")
	f.Float64Var(&o.factor, "straggler-factor", 10, "how much slower a straggler is")
	f.Float64Var(&o.tail, "tail", 0, "fraction of copies that take --tail-latency")
	f.DurationVar(&o.tailLatency, "tail-latency", time.Second, "latency of a tail copy")
	f.Float64Var(&o.correlated, "correlated", 0, "fraction of slow periods, which slow every copy sent in them")
	f.DurationVar(&o.slowPeriod, "slow-period", sim.DefaultSlowPeriod, "length of a period that may be slow")
	f.Float64Var(&o.slowFactor, "slow-factor", sim.DefaultSlowFactor, "how much slower every copy is in a slow period")
	f.StringVar(&o.quantiles, "quantiles", "0.5,0.9,0.95,0.99,0.999", "comma-separated quantiles in (0, 1) for the hedge delays")
	f.IntVar(&o.copies, "copies", 2, "copies of a request in flight at most, the first included")
	f.IntVar(&o.warmUp, "warm-up", defaults.HedgeWarmUp, "latencies an adaptive delay learns before its first hedge")
	f.IntVar(&o.samples, "samples", defaults.HedgeSamples, "latencies an adaptive delay keeps")
	f.DurationVar(&o.minDelay, "min-delay", defaults.HedgeMinDelay, "floor of an adaptive delay")
	f.StringVar(&o.budget, "budget", "shared", "retry budget for the hedges: none, or shared (one Budget that every request's hedges draw on, as one client's would)")
	f.Float64Var(&o.budgetRatio, "budget-ratio", defaults.BudgetRatio, "hedges the budget grants per first attempt (negative: none)")
	f.Float64Var(&o.budgetFloor, "budget-min-per-second", defaults.BudgetMinPerSecond, "hedges per second the budget grants whatever the traffic (negative: none)")
	f.DurationVar(&o.budgetWindow, "budget-window", defaults.BudgetWindow, "how long the budget remembers")
	f.Uint64Var(&o.seed, "seed", 1, "random seed; the same seed gives the same result")
	f.StringVar(&o.format, "format", "table", "table or json")
	f.StringVar(&o.out, "out", "", "also draw p99.9 and p99 against extra requests to this .png or .svg file")
	f.StringVar(&o.maxMemory, "max-memory", "", "refuse a run needing more memory than this (300 bytes per request), as 512MiB, 4GiB or none (default 4GiB, or the memory available if less)")
	return cmd
}

// hedgeFlags rewrites the sim and retry field names in errors as flags.
var hedgeFlags = strings.NewReplacer(
	"HedgeScenario.Requests", "--requests", "HedgeScenario.Rate", "--rate", "MaxMemory", "--max-memory",
	"Latency.Mean and TailLatency", "--mean and --tail-latency", "Latency.Sigma", "--sigma",
	"Latency.Stragglers and Tail", "--stragglers and --tail", "StragglerFactor and SlowFactor", "--straggler-factor and --slow-factor",
	"HedgeScenario.Correlated", "--correlated", "HedgeScenario.SlowPeriod", "--slow-period",
	"HedgeConfig.MaxCopies", "--copies", "HedgeConfig.WarmUp", "--warm-up", "HedgeConfig.Samples", "--samples",
	"HedgeConfig.MinDelay", "--min-delay", "BudgetConfig.Ratio", "--budget-ratio",
	"BudgetConfig.MinPerSecond", "--budget-min-per-second", "BudgetConfig.Window", "--budget-window",
)

// scenario checks the flags and builds the curve's inputs, or a usageError.
func (o *hedgeOptions) scenario() (sim.HedgeScenario, []float64, *retry.BudgetConfig, error) {
	bad := func(format string, a ...any) error {
		return usageError{fmt.Errorf("simulate hedge: "+format, a...)}
	}
	var s sim.HedgeScenario
	switch {
	case o.format != "table" && o.format != "json":
		return s, nil, nil, bad("unknown --format %q (want table or json)", o.format)
	case o.budget != "none" && o.budget != "shared":
		return s, nil, nil, bad("unknown --budget %q (want none or shared)", o.budget)
	case o.requests <= 0:
		return s, nil, nil, bad("--requests %d must be positive", o.requests)
	case !(o.rate > 0):
		return s, nil, nil, bad("--rate %v must be positive", o.rate)
	case o.mean <= 0:
		return s, nil, nil, bad("--mean %v must be positive", o.mean)
	case o.sigma == 0:
		return s, nil, nil, bad("--sigma 0 would mean the default (%v); give a negative value for none", sim.DefaultLatencySigma)
	case o.copies < 1:
		return s, nil, nil, bad("--copies %d must be at least 1", o.copies)
	case o.warmUp < 1 || o.samples < 1:
		return s, nil, nil, bad("--warm-up and --samples must be at least 1")
	case o.minDelay <= 0 || o.tailLatency <= 0 || o.slowPeriod <= 0 || o.budgetWindow <= 0:
		return s, nil, nil, bad("--min-delay, --tail-latency, --slow-period and --budget-window must be positive")
	case !(o.factor > 0) || !(o.slowFactor > 0):
		return s, nil, nil, bad("--straggler-factor and --slow-factor must be positive")
	case o.budgetRatio == 0 || o.budgetFloor == 0:
		return s, nil, nil, bad("--budget-ratio 0 and --budget-min-per-second 0 would mean the defaults; give a negative number for none")
	}
	if o.out != "" {
		if err := checkPlotExt(o.out); err != nil {
			return s, nil, nil, bad("--out %q: want a .png or .svg file", o.out)
		}
	}
	var qs []float64
	for _, f := range strings.Split(o.quantiles, ",") {
		q, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(q > 0 && q < 1) {
			return s, nil, nil, bad("--quantiles: %q is not a number in (0, 1)", f)
		}
		qs = append(qs, q)
	}
	if len(qs) > 16 {
		return s, nil, nil, bad("--quantiles: %d given, at most 16", len(qs))
	}
	maxMem, err := parseMaxMemory(o.maxMemory)
	if err != nil {
		return s, nil, nil, bad("--max-memory %q: %v", o.maxMemory, err)
	}
	s = sim.HedgeScenario{
		Requests: o.requests, Rate: o.rate, Seed: o.seed, MaxMemory: maxMem,
		Latency: sim.Latency{Mean: o.mean, Sigma: o.sigma, Stragglers: o.stragglers, StragglerFactor: o.factor,
			Tail: o.tail, TailLatency: o.tailLatency},
		Correlated: o.correlated, SlowPeriod: o.slowPeriod, SlowFactor: o.slowFactor,
		Hedge: &retry.HedgeConfig{MaxCopies: o.copies, WarmUp: o.warmUp, Samples: o.samples, MinDelay: o.minDelay},
	}
	var budget *retry.BudgetConfig
	if o.budget == "shared" {
		budget = &retry.BudgetConfig{Ratio: o.budgetRatio, MinPerSecond: o.budgetFloor, Window: o.budgetWindow}
	}
	// Check everything before the first run: a refusal must not come after
	// the sweep has started.
	check := s
	check.Budget = budget
	if err := check.Validate(); err != nil {
		return s, nil, nil, hedgeUsage(err)
	}
	return s, qs, budget, nil
}

func hedgeUsage(err error) error {
	msg := hedgeFlags.Replace(strings.TrimPrefix(err.Error(), sim.ErrScenario.Error()+": "))
	msg = strings.TrimPrefix(msg, "retry: ")
	return usageError{errors.New("simulate hedge: " + msg)}
}

func runSimulateHedge(ctx context.Context, o *hedgeOptions, stdout io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	s, qs, budget, err := o.scenario()
	if err != nil {
		return err
	}
	ctx, signalled, stopSignals := interruptible(ctx)
	defer stopSignals()
	var plotFile *output
	if o.out != "" {
		// Opened before the run, so that a file that cannot be written is
		// bad input; removed again if retry created it and the run failed.
		if plotFile, err = openOutputFlag("simulate hedge: --out", o.out); err != nil {
			return err
		}
	}
	pts, err := sim.HedgeCurve(ctx, s, qs, budget)
	if err == nil && plotFile != nil {
		err = writeOutput(plotFile, func(w io.Writer) error { return writeHedgePlot(w, plotFormat(o.out), pts) })
	}
	if err != nil {
		if plotFile != nil {
			plotFile.abandon()
		}
		if code := signalled(); code != 0 {
			return &exitError{code: code, msg: "simulate hedge: interrupted"}
		}
		if errors.Is(err, sim.ErrScenario) {
			return hedgeUsage(err)
		}
		return err
	}
	if o.format == "json" {
		type row struct {
			Hedge   string  `json:"hedge"`
			P50     float64 `json:"p50_ms"`
			P95     float64 `json:"p95_ms"`
			P99     float64 `json:"p99_ms"`
			P999    float64 `json:"p999_ms"`
			Extra   float64 `json:"extra_requests"`
			Refused int     `json:"budget_refused"`
			Won     int     `json:"hedges_won"`
		}
		rows := make([]row, len(pts))
		for i, p := range pts {
			r := p.Result
			rows[i] = row{p.Name, ms(r.P50), ms(r.P95), ms(r.P99), ms(r.P999), r.Extra, r.Refused, r.Won}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "hedge\tp50\tp95\tp99\tp99.9\textra\trefused\t")
	for _, p := range pts {
		r := p.Result
		fmt.Fprintf(tw, "%s\t%v\t%v\t%v\t%v\t%.1f%%\t%d\t\n", p.Name, round(r.P50), round(r.P95), round(r.P99), round(r.P999), r.Extra*100, r.Refused)
	}
	return tw.Flush()
}

// round keeps three significant digits of a latency for the table.
func round(d time.Duration) time.Duration {
	switch {
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	default:
		return d.Round(10 * time.Microsecond)
	}
}

// writeHedgePlot draws the curve: p99.9 (solid) and p99 (dashed) against
// the extra requests, one line per rule (fixed, adaptive, each with and
// without the budget) through its quantiles, the unhedged run as a point.
func writeHedgePlot(w io.Writer, format string, pts []sim.CurvePoint) error {
	p := plot.New()
	p.Title.Text = "hedging: tail latency against extra requests"
	p.X.Label.Text = "extra requests (%)"
	p.Y.Label.Text = "latency (ms, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	series := map[string]plotter.XYs{}
	var order []string
	ms := func(d time.Duration) float64 { return max(float64(d)/1e6, 1e-3) }
	for _, c := range pts {
		if c.Name == "none" {
			continue
		}
		rule := strings.Fields(c.Name)[0] // fixed or adaptive
		if strings.HasSuffix(c.Name, "+budget") {
			rule += " +budget"
		}
		for _, q := range []string{"p99.9", "p99"} {
			key := rule + " " + q
			if _, ok := series[key]; !ok {
				order = append(order, key)
			}
			y := ms(c.Result.P999)
			if q == "p99" {
				y = ms(c.Result.P99)
			}
			series[key] = append(series[key], plotter.XY{X: 100 * c.Result.Extra, Y: y})
		}
	}
	for i, key := range order {
		l, err := plotter.NewLine(series[key])
		if err != nil {
			return fmt.Errorf("simulate hedge: plot: %w", err)
		}
		l.Color = strategyColors[(i/2)%len(strategyColors)]
		l.Width = vg.Points(1.2)
		if strings.HasSuffix(key, " p99") {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(key, l)
	}
	if len(pts) > 0 && pts[0].Name == "none" {
		sc, err := plotter.NewScatter(plotter.XYs{{X: 0, Y: ms(pts[0].Result.P999)}, {X: 0, Y: ms(pts[0].Result.P99)}})
		if err != nil {
			return fmt.Errorf("simulate hedge: plot: %w", err)
		}
		p.Add(sc)
		p.Legend.Add("no hedging (p99.9, p99)", sc)
	}
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	wt, err := p.WriterTo(9*vg.Inch, 5*vg.Inch, format)
	if err != nil {
		return fmt.Errorf("simulate hedge: plot: %w", err)
	}
	if _, err := wt.WriteTo(w); err != nil {
		return fmt.Errorf("simulate hedge: plot: %w", err)
	}
	return nil
}
