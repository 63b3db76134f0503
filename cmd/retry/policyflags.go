package main

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrykit/retry"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// policyFlags holds the policy and logging flags that every subcommand
// shares. Zero values mean "the preset's value" (the library default
// without --preset); an explicit flag always overrides the preset.
type policyFlags struct {
	cmd *cobra.Command

	attempts                                     int
	initial, maxDelay, maxElapsed, attemptTimout time.Duration
	multiplier                                   float64
	jitter, preset                               string

	quiet, verbose bool
	logFormat      string
}

// addPolicyFlags registers the shared policy flags on cmd, except those
// named in omit (flags that would do nothing there, such as
// "attempt-timeout" or "verbose" for schedule).
func addPolicyFlags(cmd *cobra.Command, omit ...string) *policyFlags {
	f := &policyFlags{cmd: cmd}
	fs := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
	fs.IntVar(&f.attempts, "attempts", 0, "total attempts, the first included; -1 for unlimited (default 10)")
	fs.DurationVar(&f.initial, "initial", 0, "wait before the first retry; 0 for no waits at all (default 1s)")
	fs.Float64Var(&f.multiplier, "multiplier", 0, "growth factor of the wait per retry, at least 1 (default 2)")
	fs.DurationVar(&f.maxDelay, "max-delay", 0, "cap on every wait, jitter included (default 32s)")
	fs.StringVar(&f.jitter, "jitter", "", "none, full, equal, decorrelated, additive[:MAX] or proportional:F (default additive: 0..min(1s, --initial))")
	fs.DurationVar(&f.maxElapsed, "max-elapsed", 0, "total time budget; no wait starts that would end past it (default none)")
	fs.DurationVar(&f.attemptTimout, "attempt-timeout", 0, "time limit of each attempt (default none)")
	fs.StringVar(&f.preset, "preset", "default", "starting policy: default, aws or grpc; other policy flags override it")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "print nothing about retries, only fatal errors")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "also print each attempt and the policy")
	fs.StringVar(&f.logFormat, "log-format", "text", "text (a live countdown on a terminal) or json (one slog JSON object a line; the last one has attempts, elapsed_ms, reason, exit_code and, for http, status)")
	fs.VisitAll(func(fl *pflag.Flag) {
		if !slices.Contains(omit, fl.Name) {
			cmd.Flags().AddFlag(fl)
		}
	})
	cmd.RegisterFlagCompletionFunc("jitter", cobra.FixedCompletions(
		[]string{"none", "full", "equal", "decorrelated", "additive", "additive:1s", "proportional:0.2"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("preset", cobra.FixedCompletions([]string{"default", "aws", "grpc"}, cobra.ShellCompDirectiveNoFileComp))
	if cmd.Flags().Lookup("log-format") == nil {
		return f
	}
	cmd.RegisterFlagCompletionFunc("log-format", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return f
}

func (f *policyFlags) changed(name string) bool { return f.cmd.Flags().Changed(name) }

// commandLine renders the policy flags given explicitly, for showing a
// command line that reproduces the run.
func (f *policyFlags) commandLine() string {
	var b strings.Builder
	f.cmd.Flags().Visit(func(fl *pflag.Flag) {
		b.WriteString(" --" + fl.Name)
		if fl.Value.Type() != "bool" {
			b.WriteString(" " + fl.Value.String())
		}
	})
	return b.String()
}

// policy builds the retry.Policy the flags describe, or a usage error
// (exitUsage) naming the flag and its value.
func (f *policyFlags) policy() (retry.Policy, error) {
	var p retry.Policy
	switch f.preset {
	case "default", "":
		p = retry.Policy{}
	case "aws":
		p = retry.AWSStandardPolicy()
	case "grpc":
		p = retry.GRPCConnectPolicy()
	default:
		return p, usagef("--preset %q: want default, aws or grpc", f.preset)
	}
	switch f.logFormat {
	case "text", "json", "": // "": a subcommand without --log-format
	default:
		return p, usagef("--log-format %q: want text or json", f.logFormat)
	}
	if f.quiet && f.verbose {
		return p, usagef("--quiet and --verbose exclude each other")
	}
	if f.changed("attempts") {
		switch {
		case f.attempts == -1:
			p.MaxAttempts = retry.Unlimited
		case f.attempts < 1:
			return p, usagef("--attempts %d: want at least 1, or -1 for unlimited", f.attempts)
		default:
			p.MaxAttempts = f.attempts
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"initial", f.initial}, {"max-delay", f.maxDelay}, {"max-elapsed", f.maxElapsed}, {"attempt-timeout", f.attemptTimout}} {
		if d.v < 0 {
			return p, usagef("--%s %v: must not be negative", d.name, d.v)
		}
	}
	if f.changed("initial") {
		p.Initial = f.initial
		if f.initial == 0 {
			p.Initial = retry.Immediate
		}
	}
	if f.changed("multiplier") {
		if !(f.multiplier >= 1) || math.IsInf(f.multiplier, 1) {
			return p, usagef("--multiplier %v: must be a finite number, at least 1", f.multiplier)
		}
		p.Multiplier = f.multiplier
	}
	if f.changed("max-delay") {
		p.MaxDelay = f.maxDelay
	}
	if f.changed("max-elapsed") {
		p.MaxElapsed = f.maxElapsed
	}
	if f.changed("attempt-timeout") {
		p.AttemptTimeout = f.attemptTimout
	}
	if f.changed("jitter") {
		j, err := parseJitter(f.jitter)
		if err != nil {
			return p, usagef("--jitter %q: %v", f.jitter, err)
		}
		p.Jitter = j
	}
	if p.Initial != retry.Immediate {
		// Validate's own message would name both fields as flags, though
		// the user may have given only one of them.
		initial, maxDelay := cmp.Or(p.Initial, retry.DefaultInitial), cmp.Or(p.MaxDelay, retry.DefaultMaxDelay)
		if initial > maxDelay {
			return p, usagef("%s is below %s", f.source("max-delay", maxDelay), f.source("initial", initial))
		}
	}
	if err := p.Validate(); err != nil {
		return p, usagef("%s", flagNames.Replace(strings.TrimPrefix(err.Error(), retry.ErrInvalidPolicy.Error()+": ")))
	}
	return p, nil
}

// source names the flag that gave a policy value: "--max-delay 1s" when
// the user gave it, else "the default --max-delay 32s", or "--preset
// aws's --max-delay 20s".
func (f *policyFlags) source(flag string, v time.Duration) string {
	switch {
	case f.changed(flag):
		return fmt.Sprintf("--%s %v", flag, v)
	case f.preset == "default" || f.preset == "":
		return fmt.Sprintf("the default --%s %v", flag, v)
	}
	return fmt.Sprintf("--preset %s's --%s %v", f.preset, flag, v)
}

// flagNames rewrites Policy field names in Validate's messages as flags.
var flagNames = strings.NewReplacer(
	"MaxDelay", "--max-delay", "Initial", "--initial", "Multiplier", "--multiplier",
	"MaxElapsed", "--max-elapsed", "AttemptTimeout", "--attempt-timeout", "MaxAttempts", "--attempts",
	"AdditiveJitter maximum", "--jitter additive maximum", "ProportionalJitter fraction", "--jitter proportional fraction",
)

// parseJitter reads a --jitter value.
func parseJitter(s string) (retry.Jitter, error) {
	name, arg, hasArg := strings.Cut(s, ":")
	switch name {
	case "none", "full", "equal", "decorrelated":
		if hasArg {
			return retry.Jitter{}, fmt.Errorf("%s takes no argument", name)
		}
		return map[string]retry.Jitter{"none": retry.NoJitter(), "full": retry.FullJitter(),
			"equal": retry.EqualJitter(), "decorrelated": retry.DecorrelatedJitter()}[name], nil
	case "additive":
		if !hasArg {
			return retry.Jitter{}, nil // the default: 0..min(1 s, --initial)
		}
		d, err := time.ParseDuration(arg)
		if err != nil || d < 0 {
			return retry.Jitter{}, errors.New("want additive:DURATION with a non-negative duration such as additive:500ms")
		}
		return retry.AdditiveJitter(d), nil
	case "proportional":
		v, err := strconv.ParseFloat(arg, 64)
		if !hasArg || err != nil || !(v >= 0 && v <= 1) {
			return retry.Jitter{}, errors.New("want proportional:F with F between 0 and 1, such as proportional:0.2")
		}
		return retry.ProportionalJitter(v), nil
	}
	return retry.Jitter{}, errors.New("want none, full, equal, decorrelated, additive[:MAX] or proportional:F")
}
