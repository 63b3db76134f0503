package main

import (
	"cmp"
	"context"
	"errors"
	"io"
	"math"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/defaults"
	"github.com/retrykit/retry/sim"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// openOptions holds the flags of `retry simulate --model open`.
type openOptions struct {
	scenario, arrivals, sweep      string
	rate, serviceRate              float64
	triggerCapacity, spikeFactor   float64
	timeout, triggerAt, triggerFor time.Duration
	spikeAt, spikeFor, duration    time.Duration
	queueLimit                     int
	dropExpired, throttleShared    bool
	throttleK                      float64
	throttleWindow                 time.Duration
	maxWork                        string
	maxWorkValue                   float64        // --max-work parsed: 0 the default, -1 none
	flags                          *pflag.FlagSet // the open model's own flags
}

// openOnly are the flags that mean something only in the open model, and
// closedOnly those that mean nothing in it.
var closedOnly = []string{"clients", "capacity", "outage", "start-window", "retry-after", "latency", "latency-sd",
	"trials"}

// addOpenFlags registers the open model's flags on cmd.
func addOpenFlags(cmd *cobra.Command) *openOptions {
	o := &openOptions{}
	f := pflag.NewFlagSet("open", pflag.ContinueOnError)
	f.StringVar(&o.scenario, "scenario", "", "model open: a published experiment to start from, bronson or huang (implies --model open; other flags override its values)")
	f.Float64Var(&o.rate, "rate", 0, "model open: calls arriving per second")
	f.StringVar(&o.arrivals, "arrivals", "even", "model open: even or poisson (seeded by --seed)")
	f.Float64Var(&o.serviceRate, "service-rate", 0, "model open: requests per second the server completes")
	f.DurationVar(&o.timeout, "timeout", 0, "model open: client attempt timeout (0: none)")
	f.IntVar(&o.queueLimit, "queue-limit", 0, "model open: most requests waiting at the server; more are rejected at once (0: unbounded)")
	f.BoolVar(&o.dropExpired, "drop-expired", false, "model open: the server drops requests whose client stopped waiting")
	f.DurationVar(&o.triggerAt, "trigger-at", 0, "model open: start of the trigger")
	f.DurationVar(&o.triggerFor, "trigger-for", 0, "model open: length of the trigger (0: none)")
	f.Float64Var(&o.triggerCapacity, "trigger-capacity", 0, "model open: fraction of --service-rate left during the trigger, 0 to 1 (0: an outage)")
	f.DurationVar(&o.spikeAt, "spike-at", 0, "model open: start of a load spike")
	f.DurationVar(&o.spikeFor, "spike-for", 0, "model open: length of the load spike (0: none)")
	f.Float64Var(&o.spikeFactor, "spike-factor", 0, "model open: arrival rate multiplier during the spike")
	f.DurationVar(&o.duration, "duration", 0, "model open: virtual time simulated")
	f.Float64Var(&o.throttleK, "throttle", 0, "model open: adaptive client-side throttling (retry.Throttle) with this K, at least 1 (0: none)")
	f.DurationVar(&o.throttleWindow, "throttle-window", defaults.ThrottleWindow, "model open: how long the throttle remembers requests and accepts")
	f.BoolVar(&o.throttleShared, "throttle-shared", false, "model open: one throttle for the whole fleet of --processes instead of one per process")
	f.StringVar(&o.maxWork, "max-work", "", "model open: refuse a run estimated to simulate more attempts than this, as 5e9, or none (default 1e9); a --sweep's cells together at most 10 times this")
	f.StringVar(&o.sweep, "sweep", "", "model open: a phase diagram over two parameters, as trigger-capacity=0.3:0.7:0.05,trigger-for=2s:20s:2s (axes: trigger-capacity, trigger-for, rate)")
	f.VisitAll(func(fl *pflag.Flag) { cmd.Flags().AddFlag(fl) })
	o.flags = f
	cmd.RegisterFlagCompletionFunc("scenario", cobra.FixedCompletions(sim.OpenScenarioNames(), cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("arrivals", cobra.FixedCompletions([]string{"even", "poisson"}, cobra.ShellCompDirectiveNoFileComp))
	return o
}

// isOpen reports whether the command line asks for the open model, and
// refuses flags of the other models with it, and its own flags without it.
func (oo *openOptions) isOpen(cmd *cobra.Command, model string) (bool, error) {
	changed := cmd.Flags().Changed
	open := model == "open" || changed("scenario")
	if changed("scenario") && changed("model") && model != "open" {
		return false, usagef("simulate: --scenario runs the open model, not --model %s", model)
	}
	for _, n := range closedOnly {
		if open && changed(n) {
			return false, usagef("simulate: --%s does not apply to the open model", n)
		}
	}
	if !open {
		var err error
		oo.flags.VisitAll(func(fl *pflag.Flag) {
			if err == nil && changed(fl.Name) {
				err = usagef("simulate: --%s applies only to the open model (--model open or --scenario)", fl.Name)
			}
		})
		return false, err
	}
	return true, nil
}

// openStrategies are the names --compare takes in the open model.
var openStrategies = []string{"policy", "plain", "no-retry", "retries2", "backoff", "budget", "throttle", "drop-expired", "aws"}

// openRun is one strategy of an open-model run.
type openRun struct {
	Name   string
	Result sim.OpenResult
}

// base builds the scenario the flags describe, before any strategy.
func (oo *openOptions) base(cmd *cobra.Command, o *simOptions) (sim.OpenScenario, error) {
	changed := cmd.Flags().Changed
	var s sim.OpenScenario
	if oo.scenario != "" || changed("scenario") {
		var err error
		if s, err = sim.NamedOpenScenario(oo.scenario); err != nil {
			return s, usagef("simulate: unknown --scenario %q (want %s)", oo.scenario, strings.Join(sim.OpenScenarioNames(), " or "))
		}
	}
	if changed("arrivals") || s.Arrivals == 0 {
		a, err := sim.ParseArrivals(oo.arrivals)
		if err != nil {
			return s, usagef("simulate: unknown --arrivals %q (want even or poisson)", oo.arrivals)
		}
		s.Arrivals = a
	}
	set := func(name string, dst *float64, v float64) {
		if changed(name) {
			*dst = v
		}
	}
	setD := func(name string, dst *time.Duration, v time.Duration) {
		if changed(name) {
			*dst = v
		}
	}
	set("rate", &s.Rate, oo.rate)
	set("service-rate", &s.ServiceRate, oo.serviceRate)
	set("trigger-capacity", &s.TriggerCapacity, oo.triggerCapacity)
	set("spike-factor", &s.SpikeFactor, oo.spikeFactor)
	setD("timeout", &s.Timeout, oo.timeout)
	setD("trigger-at", &s.TriggerAt, oo.triggerAt)
	setD("trigger-for", &s.TriggerFor, oo.triggerFor)
	setD("spike-at", &s.SpikeAt, oo.spikeAt)
	setD("spike-for", &s.SpikeFor, oo.spikeFor)
	setD("duration", &s.Duration, oo.duration)
	if changed("slot") {
		s.Slot = o.slot
	}
	if changed("queue-limit") {
		if oo.queueLimit < 0 {
			return s, usagef("simulate: --queue-limit %d must not be negative", oo.queueLimit)
		}
		s.QueueLimit = oo.queueLimit
	}
	if changed("drop-expired") {
		s.DropExpired = oo.dropExpired
	}
	s.Seed = o.seed
	if o.processes <= 0 {
		return s, usagef("simulate: --processes %d must be positive", o.processes)
	}
	s.Processes = o.processes
	p, err := o.policy.policy()
	if err != nil {
		return s, err
	}
	if oo.scenario == "" || changed("preset") {
		s.Policy = p
	} else {
		// The scenario's policy, with the policy flags given.
		for _, c := range []struct {
			flag string
			set  func()
		}{{"attempts", func() { s.Policy.MaxAttempts = p.MaxAttempts }}, {"initial", func() { s.Policy.Initial = p.Initial }},
			{"multiplier", func() { s.Policy.Multiplier = p.Multiplier }}, {"max-delay", func() { s.Policy.MaxDelay = p.MaxDelay }},
			{"max-elapsed", func() { s.Policy.MaxElapsed = p.MaxElapsed }}, {"jitter", func() { s.Policy.Jitter = p.Jitter }}} {
			if changed(c.flag) {
				c.set()
			}
		}
		if err := s.Policy.Validate(); err != nil {
			return s, usagef("simulate: %s", flagNames.Replace(strings.TrimPrefix(err.Error(), retry.ErrInvalidPolicy.Error()+": ")))
		}
	}
	if o.budget != "none" && o.budget != "local" && o.budget != "shared" {
		return s, usagef("simulate: unknown --budget %q (want none, local or shared)", o.budget)
	}
	if changed("throttle") && !(oo.throttleK == 0 || oo.throttleK >= 1 && !math.IsInf(oo.throttleK, 1)) {
		return s, usagef("simulate: --throttle %v: want 0 (none) or a K of at least 1", oo.throttleK)
	}
	if err := oo.noOps(cmd, o, s); err != nil {
		return s, err
	}
	return s, nil
}

// noOps refuses a flag that would do nothing in the run the others
// describe, naming it and why.
func (oo *openOptions) noOps(cmd *cobra.Command, o *simOptions, s sim.OpenScenario) error {
	changed := cmd.Flags().Changed
	names := []string{"policy"}
	if o.compare != "" {
		names = strings.Split(o.compare, ",")
		for i := range names {
			names[i] = strings.TrimSpace(names[i])
		}
	}
	has := func(n string) bool { return slices.Contains(names, n) }
	sweeps := func(axis string) bool { return strings.Contains(oo.sweep, axis+"=") }
	throttled := has("throttle") || has("policy") && oo.throttleK > 0
	switch {
	case changed("throttle") && oo.throttleK > 0 && !has("policy") && !has("throttle"):
		return usagef("simulate: --throttle does nothing here: no strategy of --compare %q uses it (policy or throttle would)", o.compare)
	case (changed("throttle-window") || changed("throttle-shared")) && !throttled:
		flag := "--throttle-window"
		if changed("throttle-shared") {
			flag = "--throttle-shared"
		}
		return usagef("simulate: %s does nothing without a throttle: give --throttle K or the throttle strategy of --compare", flag)
	case changed("budget") && o.budget != "none" && !has("policy") && !has("budget") && !has("aws"):
		return usagef("simulate: --budget does nothing here: no strategy of --compare %q uses it (policy, budget or aws would)", o.compare)
	case changed("drop-expired") && has("drop-expired"):
		return usagef("simulate: --drop-expired does nothing beside the drop-expired strategy of --compare, which sets it")
	case (changed("trigger-capacity") || changed("trigger-at")) && s.TriggerFor == 0 && !sweeps("trigger-for"):
		flag := "--trigger-capacity"
		if !changed("trigger-capacity") {
			flag = "--trigger-at"
		}
		return usagef("simulate: %s does nothing without --trigger-for (the trigger's length; 0 means no trigger)", flag)
	case (changed("spike-for") || changed("spike-at")) && s.SpikeFactor == 0:
		flag := "--spike-for"
		if !changed("spike-for") {
			flag = "--spike-at"
		}
		return usagef("simulate: %s does nothing without --spike-factor (the arrival rate's multiplier; 0 means no spike)", flag)
	case changed("spike-factor") && s.SpikeFor == 0:
		return usagef("simulate: --spike-factor does nothing without --spike-for (the spike's length; 0 means no spike)")
	}
	if f := unusedBudgetFlag(cmd, o, has("budget")); f != "" {
		return usagef("simulate: --%s does nothing without --budget local|shared (or the budget strategy of --compare)", f)
	}
	return nil
}

// budgetConfig is the budget the flags describe.
func (o *simOptions) budgetConfig() (*retry.BudgetConfig, error) {
	for _, z := range []struct {
		name string
		zero bool
	}{{"budget-ratio", o.budgetRatio == 0}, {"budget-min-per-second", o.budgetFloor == 0}, {"budget-window", o.budgetWindow == 0}} {
		if z.zero {
			return nil, usagef("simulate: --%s 0 would mean the default; give the default's value or a negative number for none", z.name)
		}
	}
	b := &retry.BudgetConfig{Ratio: o.budgetRatio, MinPerSecond: o.budgetFloor, Window: o.budgetWindow}
	if _, err := retry.NewBudget(*b); err != nil {
		return nil, usagef("simulate: %s", budgetFlags.Replace(strings.TrimPrefix(err.Error(), "retry: ")))
	}
	return b, nil
}

// strategy returns the scenario of the named strategy, from base.
func (oo *openOptions) strategy(name string, base sim.OpenScenario, o *simOptions) (sim.OpenScenario, error) {
	s := base
	budget := func(scope string) error {
		b, err := o.budgetConfig()
		s.Budget, s.SharedBudget = b, scope == "shared"
		return err
	}
	throttle := func(k float64) {
		s.Throttle = &retry.ThrottleConfig{K: k, Window: oo.throttleWindow}
		s.SharedThrottle = oo.throttleShared
	}
	scope := o.budget
	if scope == "none" {
		scope = "local"
	}
	switch name {
	case "policy":
		if o.budget != "none" {
			if err := budget(o.budget); err != nil {
				return s, err
			}
		}
		if oo.throttleK > 0 {
			throttle(oo.throttleK)
		}
	case "plain":
	case "no-retry":
		s.Policy.MaxAttempts = 1
	case "retries2":
		s.Policy.MaxAttempts = 3
	case "backoff":
		s.Policy = retry.Policy{MaxAttempts: s.Policy.MaxAttempts, MaxElapsed: s.Policy.MaxElapsed}
	case "budget":
		if err := budget(scope); err != nil {
			return s, err
		}
	case "throttle":
		k := oo.throttleK
		if k == 0 {
			k = defaults.ThrottleK
		}
		throttle(k)
	case "drop-expired":
		s.DropExpired = true
	case "aws":
		// The SDKs' standard mode with their retry quota as they keep it
		// (sim.RetryQuota: refilled only by successes), not the windowed
		// retry.AWSBudget Budget.
		s.Policy = retry.AWSStandardPolicy()
		q := sim.AWSRetryQuota()
		s.Quota, s.SharedQuota = &q, o.budget == "shared"
	default:
		// A jitter, as --compare takes in the other models: the plain
		// policy with that jitter.
		j, err := parseStrategy(name)
		if err != nil {
			return s, usagef("simulate: --compare: unknown strategy %q for the open model (want %s, or a jitter: %s)",
				name, strings.Join(openStrategies, ", "), "none, full, equal, decorrelated, additive[:MAX], proportional:F")
		}
		if s.Policy.Initial == retry.Immediate {
			return s, usagef("simulate: --compare %s: a jitter does nothing to immediate resends (--initial 0, as in --scenario %s): give --initial",
				name, cmp.Or(oo.scenario, "open"))
		}
		s.Policy.Jitter = j
	}
	if oo.throttleWindow < time.Millisecond {
		return s, usagef("simulate: --throttle-window %v: want at least 1ms", oo.throttleWindow)
	}
	s.MaxMemory = o.maxMem
	s.MaxWork = oo.maxWorkValue
	if oo.sweep != "" {
		return s, nil // each cell is checked (sweep.validate): an axis may set what is missing here
	}
	if err := s.Validate(); err != nil {
		return s, usageError{errors.New(openFlags.Replace(err.Error()))}
	}
	return s, nil
}

// openFlags rewrites the sim package's OpenScenario field names as the
// flags that set them.
var openFlags = strings.NewReplacer(
	"Policy.Initial retry.Immediate (no waits)", "--initial 0 (no waits)",
	"Policy.MaxAttempts retry.Unlimited", "--attempts -1", "limit MaxAttempts", "limit --attempts",
	"ServiceRate", "--service-rate", "Rate", "--rate", "TriggerCapacity", "--trigger-capacity",
	"TriggerAt", "--trigger-at", "TriggerFor", "--trigger-for", "SpikeFactor", "--spike-factor",
	"SpikeAt", "--spike-at", "SpikeFor", "--spike-for", "QueueLimit", "--queue-limit", "Timeout", "--timeout",
	"Duration", "--duration", "Slot", "--slot", "Processes", "--processes", "MaxDuration", "the simulator's maximum",
	"MaxLoadSlots", "the simulator's limit", "over MaxRequests", "over the simulator's limit",
	"Budget.Ratio", "--budget-ratio", "Budget.MinPerSecond", "--budget-min-per-second", "Budget.Window", "--budget-window",
	"Throttle.K", "--throttle", "Throttle.Window", "--throttle-window",
	"over MaxWork", "over --max-work", "MaxMemory", "--max-memory", "Policy.MaxAttempts", "--attempts",
	"lengthen the waits or the Timeout", "lengthen the waits or --timeout",
)

// scenarios builds one scenario per strategy of --compare.
func (oo *openOptions) scenarios(cmd *cobra.Command, o *simOptions) ([]string, []sim.OpenScenario, error) {
	var err error
	switch {
	case o.format != "table" && o.format != "json":
		return nil, nil, usagef("simulate: unknown --format %q (want table or json)", o.format)
	case o.policy.changed("jitter") && o.compare != "":
		return nil, nil, usagef("simulate: --jitter and --compare both given: --compare names the strategies to run")
	}
	if o.out != "" {
		if err := checkPlotExt(o.out); err != nil {
			return nil, nil, usageError{err}
		}
	}
	if o.maxMem, err = parseMaxMemory(o.maxMemory); err != nil {
		return nil, nil, usagef("simulate: --max-memory %q: %v", o.maxMemory, err)
	}
	if oo.maxWorkValue, err = parseMaxWork(oo.maxWork); err != nil {
		return nil, nil, usagef("simulate: --max-work %q: %v", oo.maxWork, err)
	}
	base, err := oo.base(cmd, o)
	if err != nil {
		return nil, nil, err
	}
	names := []string{"policy"}
	if o.compare != "" {
		names = strings.Split(o.compare, ",")
	}
	if len(names) > maxStrategies {
		return nil, nil, usagef("simulate: --compare: %d strategies, at most %d", len(names), maxStrategies)
	}
	var scs []sim.OpenScenario
	for i, n := range names {
		n = strings.TrimSpace(n)
		names[i] = n
		if slices.Contains(names[:i], n) {
			return nil, nil, usagef("simulate: strategy %q given twice", n)
		}
		s, err := oo.strategy(n, base, o)
		if err != nil {
			return nil, nil, err
		}
		scs = append(scs, s)
	}
	return names, scs, nil
}

func runSimulateOpen(ctx context.Context, cmd *cobra.Command, o *simOptions, oo *openOptions, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	names, scs, err := oo.scenarios(cmd, o)
	if err != nil {
		return err
	}
	var sw *sweep
	if oo.sweep != "" {
		if sw, err = parseSweep(oo.sweep); err != nil {
			return err
		}
		var work float64
		for _, s := range scs {
			w, err := sw.validate(s)
			if err != nil {
				return err
			}
			work += w
		}
		if err := checkSweepWork(work, oo.maxWorkValue); err != nil {
			return err
		}
	}
	if o.csv != "" && sw != nil {
		return usagef("simulate: --csv writes a time series, which --sweep does not make (its cells are in --format json)")
	}
	if o.csv != "" && o.out != "" && filepath.Clean(o.csv) == filepath.Clean(o.out) {
		return usagef("simulate: --csv and --out name the same file %q", o.out)
	}
	ctx, signalled, stopSignals := interruptible(ctx)
	defer stopSignals()
	var plotFile, csvFile *output
	done := false
	defer func() {
		for _, f := range []*output{plotFile, csvFile} {
			if f != nil && !done {
				f.abandon()
			}
		}
	}()
	if o.csv != "" {
		if csvFile, err = openOutputFlag("simulate: --csv", o.csv); err != nil {
			return err
		}
	}
	if o.out != "" {
		if plotFile, err = openOutputFlag("simulate: --out", o.out); err != nil {
			return err
		}
	}
	if csvFile != nil && plotFile != nil && sameFile(csvFile.f, plotFile.f) {
		return usagef("simulate: --csv %q and --out %q name the same file", o.csv, o.out)
	}
	interrupted := func(err error) error {
		if code := signalled(); code != 0 {
			return &exitError{code: code, msg: "simulate: interrupted"}
		}
		if errors.Is(err, sim.ErrScenario) {
			return usageError{errors.New(openFlags.Replace(err.Error()))}
		}
		return err
	}
	if sw != nil {
		prog := newProgress(stderr, 1)
		grid, err := sw.run(ctx, names, scs, func(n, total int) { prog.total = int64(total); prog.update(int64(n)) })
		prog.clear()
		if err != nil {
			return interrupted(err)
		}
		done = true
		if plotFile != nil {
			if err := writeOutput(plotFile, func(w io.Writer) error {
				return writePhasePlot(w, plotFormat(o.out), cmp.Or(oo.scenario, "open model"), sw, grid)
			}); err != nil {
				return err
			}
		}
		if o.format == "json" {
			return writeSweepJSON(stdout, sw, grid)
		}
		return writeSweepTable(stdout, sw, grid)
	}
	var runs []openRun
	prog := newProgress(stderr, int64(len(scs))*int64(scs[0].Duration))
	for i, s := range scs {
		if i > 0 {
			debug.FreeOSMemory() // the previous run's memory goes back: --max-memory bounds each
		}
		base := int64(i) * int64(scs[0].Duration)
		s.Progress = func(done, _ time.Duration) { prog.update(base + int64(done)) } // every strategy has one Duration
		r, err := sim.RunOpen(ctx, s)
		if err != nil {
			prog.clear()
			return interrupted(err)
		}
		runs = append(runs, openRun{names[i], r})
	}
	prog.clear()
	done = true
	if csvFile != nil {
		if err := writeOutput(csvFile, func(w io.Writer) error { return writeOpenCSV(w, runs) }); err != nil {
			return err
		}
	}
	if plotFile != nil {
		if err := writeOutput(plotFile, func(w io.Writer) error { return writeOpenPlot(w, plotFormat(o.out), oo.title(scs[0]), scs[0], runs) }); err != nil {
			return err
		}
	}
	if o.format == "json" {
		return writeOpenJSON(stdout, oo.scenario, runs)
	}
	return writeOpenTable(stdout, runs)
}
