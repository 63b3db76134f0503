package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/defaults"
	"github.com/retrykit/retry/sim"
	"github.com/spf13/cobra"
)

// simOptions holds the flags of `retry simulate`.
type simOptions struct {
	clients, capacity, trials        int
	slot, outage, window, retryAfter time.Duration
	latency, latencySD               time.Duration
	model, format, compare, out, csv string
	seed                             uint64
	processes                        int
	budget, maxMemory                string
	maxMem                           int64 // --max-memory parsed (open and hedge models)
	budgetRatio, budgetFloor         float64
	budgetWindow                     time.Duration
	policy                           *policyFlags // shared policy flags (policyflags.go)
}

// strategyResult is one row of the comparison.
type strategyResult struct {
	Name   string
	Result sim.Result
}

// usageError marks a bad command line or scenario: the command exits with
// the usage status.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// ExitCode reports exitUsage, the exit status for bad input.
func (e usageError) ExitCode() int { return exitUsage }

func newSimulateCmd() *cobra.Command {
	o := &simOptions{}
	var oo *openOptions // the open model's flags (simulate_open.go)
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Simulate many clients retrying against a shared server",
		Long: `simulate runs the sim package's discrete-event model: N clients that each need one
success, following the policy given by the policy flags, against a server that accepts
--capacity requests per --slot (model capacity, optionally down for --outage), or writing
one row with optimistic concurrency (model contention, the "Exponential Backoff And
Jitter" study). With --compare it runs one strategy (jitter) per name (at most 16) and prints one
row each. The --out and --csv files are opened before the run: one that cannot be written is bad input.

With --budget local or shared the clients have a retry budget (retry.Budget's rule, in virtual
time: --budget-ratio, --budget-min-per-second, --budget-window); --processes P splits them into a
fleet of P processes, each with a budget of its own (local) or all drawing on one (shared).

A run whose memory estimate (about 40 bytes per client, more when the slots are short compared with the
waits) exceeds --max-memory is refused before it starts.

With --model open (or --scenario bronson|huang) it runs the open-system model of metastable failures
instead: calls arriving at --rate, a FIFO server at --service-rate, a client --timeout, a trigger that
cuts capacity; --compare then names remedies (policy, plain, no-retry, retries2, backoff, budget,
throttle, drop-expired, aws) or jitters, and --sweep draws a phase diagram. There, --max-work bounds
the attempts a run is estimated to make (a sweep's cells together: 10 times it), --max-memory what it holds
in flight (96 bytes per call), and a run that ends too soon after its trigger reports "cannot tell".`,
		Example: `  retry simulate --clients 10000 --capacity 100 --outage 10s --compare none,full,equal,decorrelated --out herd.png
  retry simulate --model contention --clients 100 --trials 100 --initial 10ms --max-delay 2s --attempts -1 --compare full,equal,decorrelated,none
  retry simulate --clients 10000 --start-window 60s --outage 1000h --attempts -1 --max-elapsed 60s --processes 100 --budget shared
  retry simulate --scenario huang --compare plain,budget,throttle,drop-expired --out huang.png`,
		Args:          noArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if open, err := oo.isOpen(cmd, o.model); open || err != nil {
				if err != nil {
					return err
				}
				return runSimulateOpen(cmd.Context(), cmd, o, oo, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return runSimulate(cmd.Context(), cmd, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.clients, "clients", 10000, "number of clients, each needing one success")
	f.IntVar(&o.capacity, "capacity", sim.DefaultCapacity, "requests the server accepts per slot (capacity model)")
	f.DurationVar(&o.slot, "slot", sim.DefaultSlot, "width of a capacity slot and of one point of the load series (default 100ms; the open model's: 1s)")
	f.DurationVar(&o.outage, "outage", 0, "the server fails every request for this long at the start (capacity model)")
	f.DurationVar(&o.window, "start-window", 0, "spread the first requests uniformly over this window (0: all at once)")
	f.DurationVar(&o.retryAfter, "retry-after", 0, "Retry-After carried by failed responses (capacity model; 0: none)")
	f.StringVar(&o.model, "model", "capacity", "capacity, contention or open (an open system: see --scenario)")
	f.IntVar(&o.trials, "trials", 1, "independent runs averaged")
	f.DurationVar(&o.latency, "latency", sim.DefaultLatency, "mean one-way message delay (contention model)")
	f.DurationVar(&o.latencySD, "latency-sd", sim.DefaultLatencySD, "standard deviation of the message delay (contention model)")
	f.Uint64Var(&o.seed, "seed", 1, "random seed; the same seed gives the same result")
	f.StringVar(&o.format, "format", "table", "table or json")
	f.StringVar(&o.compare, "compare", "", "comma-separated strategies to compare: none, full, equal, decorrelated, additive[:MAX], proportional:F (default: the policy's jitter)")
	f.StringVar(&o.out, "out", "", "write a plot of requests per slot to this .png or .svg file")
	f.StringVar(&o.csv, "csv", "", "write the requests-per-slot series to this CSV file")
	f.IntVar(&o.processes, "processes", 1, "split the clients into this many processes (client i in process i mod P)")
	f.StringVar(&o.budget, "budget", "none", "retry budget: none, local (one per process) or shared (one for the fleet)")
	f.Float64Var(&o.budgetRatio, "budget-ratio", defaults.BudgetRatio, "retries the budget grants per first attempt (negative: none)")
	f.Float64Var(&o.budgetFloor, "budget-min-per-second", defaults.BudgetMinPerSecond, "retries per second the budget grants whatever the traffic (negative: none)")
	f.DurationVar(&o.budgetWindow, "budget-window", defaults.BudgetWindow, "how long the budget remembers first attempts and retries")
	f.StringVar(&o.maxMemory, "max-memory", "", "refuse a run needing more memory than this, as 512MiB, 4GiB or none (default 4GiB, or the memory available if less)")
	o.policy = addPolicyFlags(cmd, "attempt-timeout", "quiet", "verbose", "log-format") // no attempt takes time, nothing is logged
	oo = addOpenFlags(cmd)
	// Each model has its own default slot: the usage says both, and the
	// generic "(default ...)" would give only the closed models'.
	f.Lookup("slot").DefValue = "0s"
	cmd.AddCommand(newSimulateHedgeCmd())
	return cmd
}

// maxStrategies bounds --compare: each strategy's result keeps its load
// series (up to 2^20 slots, 8 MiB) until the end, outside --max-memory.
const maxStrategies = 16

// parseStrategy turns a --compare name into a Jitter; it accepts what
// --jitter does (parseJitter in policyflags.go).
func parseStrategy(s string) (retry.Jitter, error) {
	j, err := parseJitter(strings.TrimSpace(s))
	if err != nil {
		return retry.Jitter{}, fmt.Errorf("unknown strategy %q: %v", s, err)
	}
	return j, nil
}

// scenarios builds one Scenario per strategy, or a usageError.
func (o *simOptions) scenarios(cmd *cobra.Command) ([]string, []sim.Scenario, error) {
	bad := func(format string, a ...any) error { return usageError{fmt.Errorf("simulate: "+format, a...)} }
	model, err := sim.ParseModel(o.model)
	if err != nil {
		return nil, nil, usageError{err}
	}
	switch {
	case o.format != "table" && o.format != "json":
		return nil, nil, bad("unknown --format %q (want table or json)", o.format)
	case o.clients <= 0:
		return nil, nil, bad("--clients %d must be positive", o.clients)
	case o.capacity <= 0:
		return nil, nil, bad("--capacity %d must be positive", o.capacity)
	case o.slot <= 0:
		return nil, nil, bad("--slot %v must be positive", o.slot)
	case o.trials <= 0:
		return nil, nil, bad("--trials %d must be positive", o.trials)
	case o.processes <= 0:
		return nil, nil, bad("--processes %d must be positive", o.processes)
	case o.processes > o.clients:
		return nil, nil, bad("--processes %d is more than --clients %d", o.processes, o.clients)
	case o.budget != "none" && o.budget != "local" && o.budget != "shared":
		return nil, nil, bad("unknown --budget %q (want none, local or shared)", o.budget)
	}
	if f := unusedBudgetFlag(cmd, o, false); f != "" {
		return nil, nil, bad("--%s does nothing without --budget local|shared", f)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"slot", o.slot}, {"outage", o.outage}, {"start-window", o.window}, {"retry-after", o.retryAfter},
		{"latency", o.latency}, {"latency-sd", o.latencySD}, {"budget-window", o.budgetWindow}} {
		switch {
		case d.v < 0:
			return nil, nil, bad("--%s %v must not be negative", d.name, d.v)
		case d.v > sim.MaxDuration:
			return nil, nil, bad("--%s %v is over the simulator's maximum %v", d.name, d.v, sim.MaxDuration)
		}
	}
	// The simulator reads a zero delay as its default: in the contention
	// model, which uses them, refuse it rather than run with 10ms or 2ms
	// unasked.
	if model == sim.Contention && o.latency == 0 {
		return nil, nil, bad("--latency 0 would mean the default (%v); give a positive delay (1ns for almost none)", sim.DefaultLatency)
	}
	if model == sim.Contention && o.latencySD == 0 {
		return nil, nil, bad("--latency-sd 0 would mean the default (%v); give a positive value (1ns for almost none)", sim.DefaultLatencySD)
	}
	var budget *retry.BudgetConfig
	if o.budget != "none" {
		budget = &retry.BudgetConfig{Ratio: o.budgetRatio, MinPerSecond: o.budgetFloor, Window: o.budgetWindow}
		for _, z := range []struct {
			name string
			zero bool
		}{{"budget-ratio", o.budgetRatio == 0}, {"budget-min-per-second", o.budgetFloor == 0}, {"budget-window", o.budgetWindow == 0}} {
			if z.zero {
				return nil, nil, bad("--%s 0 would mean the default; give the default's value or a negative number for none", z.name)
			}
		}
		if _, err := retry.NewBudget(*budget); err != nil {
			return nil, nil, bad("%s", budgetFlags.Replace(strings.TrimPrefix(err.Error(), "retry: ")))
		}
	}
	maxMem, err := parseMaxMemory(o.maxMemory)
	if err != nil {
		return nil, nil, bad("--max-memory %q: %v", o.maxMemory, err)
	}
	if o.out != "" {
		if err := checkPlotExt(o.out); err != nil {
			return nil, nil, usageError{err}
		}
	}
	p, err := o.policy.policy()
	if err != nil {
		return nil, nil, err
	}
	if o.compare != "" && o.policy.changed("jitter") {
		return nil, nil, bad("--jitter and --compare both given: --compare names the strategies to run")
	}
	names := strings.Split(o.compare, ",")
	if o.compare == "" {
		names = []string{p.Jitter.String()}
	}
	if len(names) > maxStrategies {
		return nil, nil, bad("--compare: %d strategies, at most %d", len(names), maxStrategies)
	}
	var scs []sim.Scenario
	seen := map[string]bool{}
	for i, n := range names {
		n = strings.TrimSpace(n)
		names[i] = n
		j, err := parseStrategy(n)
		if err != nil {
			return nil, nil, bad("--compare: %v", err)
		}
		if seen[n] {
			return nil, nil, bad("strategy %q given twice", n)
		}
		seen[n] = true
		s := sim.Scenario{
			Model: model, Clients: o.clients, Capacity: o.capacity, Slot: o.slot, Outage: o.outage,
			StartWindow: o.window, RetryAfter: o.retryAfter, Latency: o.latency, LatencySD: o.latencySD,
			Trials: o.trials, Seed: o.seed,
			Policy:    p,
			Processes: o.processes, Budget: budget, SharedBudget: o.budget == "shared", MaxMemory: maxMem,
		}
		s.Policy.Jitter = j
		if err := s.Policy.Validate(); err != nil {
			return nil, nil, usageError{fmt.Errorf("simulate: %w", err)}
		}
		// Every strategy is checked before the first one runs: a refusal
		// (memory, work) must not come after minutes of another's run.
		if err := s.Validate(); err != nil {
			if !errors.Is(err, sim.ErrScenario) && !errors.Is(err, retry.ErrInvalidPolicy) {
				return nil, nil, err
			}
			msg := simFlags.Replace(err.Error())
			if len(names) > 1 {
				msg = fmt.Sprintf("%s (strategy %s of --compare)", msg, n)
			}
			return nil, nil, usageError{errors.New(msg)}
		}
		scs = append(scs, s)
	}
	return names, scs, nil
}

func runSimulate(ctx context.Context, cmd *cobra.Command, o *simOptions, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	names, scs, err := o.scenarios(cmd)
	if err != nil {
		return err
	}
	// Ctrl-C or SIGTERM stops the run (sim.Run watches ctx), so that the
	// files created below are removed, and exits 130 or 143 as the other
	// commands do. The watch starts before any file is created.
	ctx, signalled, stopSignals := interruptible(ctx)
	defer stopSignals()
	// The files are opened before the simulation, which may take minutes: a
	// file that cannot be written is bad input. They are truncated when the
	// results are written, and removed again if retry created them and the
	// run ended without results.
	var csvFile, plotFile *output
	abandon := func() {
		for _, f := range []*output{csvFile, plotFile} {
			if f != nil {
				f.abandon()
			}
		}
	}
	if o.csv != "" && o.out != "" && filepath.Clean(o.csv) == filepath.Clean(o.out) {
		return usageError{fmt.Errorf("simulate: --csv and --out name the same file %q", o.out)}
	}
	if o.csv != "" {
		if csvFile, err = openOutputFlag("simulate: --csv", o.csv); err != nil {
			return err
		}
	}
	if o.out != "" {
		if plotFile, err = openOutputFlag("simulate: --out", o.out); err != nil {
			abandon()
			return err
		}
	}
	if csvFile != nil && plotFile != nil && sameFile(csvFile.f, plotFile.f) {
		// One file under two names (a path, a link): the plot would
		// overwrite the CSV.
		abandon()
		return usageError{fmt.Errorf("simulate: --csv %q and --out %q name the same file", o.csv, o.out)}
	}
	done := false
	defer func() {
		if !done {
			abandon()
		}
	}()
	prog := newProgress(stderr, int64(len(scs))*int64(o.clients)*int64(o.trials))
	var res []strategyResult
	for i, s := range scs {
		if i > 0 {
			// The previous strategy's memory goes back before the next
			// one takes its own, so that --max-memory bounds each run.
			debug.FreeOSMemory()
		}
		base := int64(i) * int64(o.clients) * int64(o.trials)
		s.Progress = func(done, _ int64) { prog.update(base + done) }
		r, err := sim.Run(ctx, s)
		if err != nil {
			prog.clear()
			if code := signalled(); code != 0 {
				return &exitError{code: code, msg: "simulate: interrupted"}
			}
			if errors.Is(err, sim.ErrScenario) || errors.Is(err, retry.ErrInvalidPolicy) {
				return usageError{errors.New(simFlags.Replace(err.Error()))}
			}
			return err
		}
		res = append(res, strategyResult{names[i], r})
	}
	prog.clear()
	if csvFile != nil || plotFile != nil {
		for i, r := range res {
			if r.Result.LoadCut {
				fmt.Fprintf(stderr, "retry: simulate: the load series of %s stops after %d slots of %v: later requests are not in the CSV or the plot\n",
					names[i], sim.MaxLoadSlots, o.slot)
			}
		}
	}
	defer func() {
		for _, f := range []*output{csvFile, plotFile} {
			if f != nil {
				f.f.Close() // after an error; closed and checked below otherwise
			}
		}
	}()
	done = true // from here on the files are written
	// The files first: they are complete even when the table's reader
	// goes away (a closed pipe ends the process at once).
	if csvFile != nil {
		if err := writeOutput(csvFile, func(w io.Writer) error { return writeCSV(w, res) }); err != nil {
			return err
		}
	}
	if o.out != "" {
		title := fmt.Sprintf("%d clients, capacity %d per %v", o.clients, o.capacity, o.slot)
		if o.outage > 0 {
			title += fmt.Sprintf(", outage %v", o.outage)
		}
		if scs[0].Model == sim.Contention {
			title = fmt.Sprintf("%d clients writing one row (contention), writes per %v", o.clients, o.slot)
		}
		if err := writeOutput(plotFile, func(w io.Writer) error { return writePlotTo(w, plotFormat(o.out), title, res) }); err != nil {
			return err
		}
	}
	if o.format == "json" {
		return writeJSON(stdout, res)
	}
	return writeTable(stdout, res)
}

// unusedBudgetFlag returns the name of a --budget-* flag given where no
// budget uses it (no --budget, and budgetStrategy false), or "".
func unusedBudgetFlag(cmd *cobra.Command, o *simOptions, budgetStrategy bool) string {
	if o.budget != "none" || budgetStrategy {
		return ""
	}
	for _, f := range []string{"budget-ratio", "budget-min-per-second", "budget-window"} {
		if cmd.Flags().Changed(f) {
			return f
		}
	}
	return ""
}

// parseMaxWork reads --max-work: a positive number of attempts, or
// "none" (-1). Empty means sim.DefaultMaxWork (0).
func parseMaxWork(s string) (float64, error) {
	switch s {
	case "":
		return 0, nil
	case "none":
		return -1, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v >= 1) || math.IsInf(v, 0) {
		return 0, errors.New("want a number of attempts of at least 1, as 5e9, or none")
	}
	return v, nil
}

// simFlags rewrites the sim package's Scenario and Policy field names as
// the flags that set them.
var simFlags = strings.NewReplacer(
	"Policy.Initial retry.Immediate (no waits)", "--initial 0 (no waits)",
	"Policy.MaxAttempts retry.Unlimited", "--attempts -1",
	"limit MaxAttempts or set RetryAfter", "limit --attempts or set --retry-after",
	"more Capacity, a longer Slot or fewer Clients", "more --capacity, a longer --slot or fewer --clients",
	"virtual time reached MaxTime", "virtual time reached its end",
	"over MaxRequests", "over the simulator's limit", "Policy.MaxAttempts", "--attempts",
	"Policy.Initial", "--initial", "Policy.MaxDelay", "--max-delay", "MaxElapsed", "--max-elapsed",
	"MaxMemory", "--max-memory", "MaxDuration", "the simulator's maximum", "Clients", "--clients",
	"Processes", "--processes", "Outage", "--outage", "StartWindow", "--start-window", "RetryAfter", "--retry-after",
	"LatencySD", "--latency-sd", "Latency", "--latency", "Slot", "--slot", "Capacity", "--capacity", "Trials", "--trials",
)

// budgetFlags rewrites retry.NewBudget's field names as flags.
var budgetFlags = strings.NewReplacer("BudgetConfig.Ratio", "--budget-ratio",
	"BudgetConfig.MinPerSecond", "--budget-min-per-second", "BudgetConfig.Window", "--budget-window")
