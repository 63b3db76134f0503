package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/retrykit/retry"
	"github.com/spf13/cobra"
)

// unlimitedRows is how many retries schedule prints for a policy without
// an attempt limit or time budget.
const unlimitedRows = 50

// maxRows is the most retries schedule prints: more is bad input, refused
// once the 100,001st row would be made (at most 100,000 rows, about 100
// bytes each plus 8 per sample, are held first, as --max-elapsed may end
// the schedule sooner). The output is then written row by row, without
// holding its text: 100,000 rows of 100 samples peak at 180 MB of RSS
// (230 MB as JSON), measured, and take under 2 s.
const maxRows = 100000

type scheduleRow struct {
	Retry           int       `json:"retry"`
	MinMS           float64   `json:"min_ms"`
	MaxMS           float64   `json:"max_ms"`
	SampleMS        float64   `json:"sample_ms"`
	SamplesMS       []float64 `json:"samples_ms,omitempty"`
	CumulativeMaxMS float64   `json:"cumulative_max_ms"`
}

func newScheduleCmd() *cobra.Command {
	var (
		samples int
		seed    uint64
		format  string
	)
	cmd := &cobra.Command{
		Use:   "schedule [policy flags] [--samples N] [--seed S] [--format table|json]",
		Short: "Print the waits a policy would use, retry by retry",
		Long: `schedule prints, for each retry, the range of waits the jitter allows (min..max),
sampled waits, and the cumulative worst-case waiting time. --samples N prints N
independent sample columns (each one full run of the schedule; decorrelated jitter
chains each column's waits); --seed makes the samples reproducible.
With --max-elapsed the rows stop once even the shortest waits would pass it; a
policy with unlimited attempts shows at most its first 50 retries, and one with over
100000 retries to show is refused (bad input).
--format json prints an array of objects with keys retry (1-based), min_ms, max_ms,
sample_ms (the first sample), samples_ms (all, when N > 1) and cumulative_max_ms.
The cumulative max saturates at the largest duration Go can hold (about 292 years),
shown as >2562047h47m16.854s.`,
		Example: `  retry schedule
  retry schedule --jitter none --initial 1s --multiplier 2 --max-delay 4s --attempts 5
  retry schedule --preset aws --samples 3 --seed 1 --format json`,
		Args: noArgs,
	}
	pf := addPolicyFlags(cmd, "attempt-timeout", "quiet", "verbose", "log-format") // schedule runs nothing and logs nothing
	cmd.Flags().IntVar(&samples, "samples", 1, "number of sampled waits per retry (sample columns)")
	cmd.Flags().Uint64Var(&seed, "seed", 0, "seed for the sampled waits (default: random)")
	cmd.Flags().StringVar(&format, "format", "table", "table or json")
	cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		p, err := pf.policy()
		if err != nil {
			return err
		}
		if samples < 1 || samples > 100 {
			return usagef("--samples %d: want 1..100", samples)
		}
		if format != "table" && format != "json" {
			return usagef("--format %q: want table or json", format)
		}
		var rng *rand.Rand
		if cmd.Flags().Changed("seed") {
			rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		}
		rows, truncated, ok := schedule(p, samples, rng)
		if !ok {
			return usagef("--attempts %d: schedule prints at most %d retries (with --max-elapsed, only those whose shortest waits fit in it count)",
				p.MaxAttempts, maxRows)
		}
		if truncated && format == "table" {
			fmt.Fprintf(cmd.ErrOrStderr(), "retry: unlimited attempts: showing the first %d retries\n", unlimitedRows)
		}
		if format == "json" {
			return writeScheduleJSON(cmd.OutOrStdout(), rows)
		}
		return writeSchedule(cmd.OutOrStdout(), rows, samples)
	}
	return cmd
}

// noArgs rejects positional arguments with a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s: unexpected argument %q", cmd.Name(), args[0])
	}
	return nil
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// schedule computes the rows; truncated reports an unlimited policy cut at
// unlimitedRows. ok is false when there would be more than maxRows rows.
func schedule(p retry.Policy, samples int, rng *rand.Rand) (rows []scheduleRow, truncated, ok bool) {
	n := p.MaxAttempts
	if n == 0 {
		n = retry.DefaultMaxAttempts
	}
	retries := n - 1
	if n == retry.Unlimited {
		retries = unlimitedRows
	}
	prev := make([]time.Duration, samples)
	var cumMin, cumMax time.Duration
	rows = []scheduleRow{}
	for i := range retries {
		lo, hi := p.Bounds(i)
		if p.MaxElapsed > 0 && lo >= p.MaxElapsed-cumMin { // as retry.Do: a wait ending at the budget is not made
			break
		}
		if i == maxRows {
			return nil, false, false
		}
		cumMin = satAdd(cumMin, lo)
		cumMax = satAdd(cumMax, hi)
		row := scheduleRow{Retry: i + 1, MinMS: msOf(lo), MaxMS: msOf(hi), CumulativeMaxMS: msOf(cumMax)}
		for s := range samples {
			d := p.Delay(i, prev[s], rng)
			prev[s] = d
			row.SamplesMS = append(row.SamplesMS, msOf(d))
		}
		row.SampleMS = row.SamplesMS[0]
		if samples == 1 {
			row.SamplesMS = nil
		}
		rows = append(rows, row)
	}
	truncated = n == retry.Unlimited && len(rows) == unlimitedRows
	return rows, truncated, true
}

// satAdd is a+b for non-negative durations, saturating at the largest
// Duration instead of wrapping negative.
func satAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// fmtMS formats milliseconds as a duration; a value at or past the largest
// Duration (where cumulative sums saturate) is shown as ">" that maximum.
func fmtMS(ms float64) string {
	ns := ms * float64(time.Millisecond)
	if ns >= math.MaxInt64 {
		return ">" + time.Duration(math.MaxInt64).Truncate(time.Millisecond).String()
	}
	d := time.Duration(ns)
	if d >= time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// writeSchedule writes rows as a table: each column right-aligned to its
// widest cell plus two spaces, as text/tabwriter would align it, but in
// two passes over rows (widths, then text) so that the text of a table of
// millions of cells is never held.
func writeSchedule(w io.Writer, rows []scheduleRow, samples int) error {
	head := scheduleHead(samples)
	cells := func(r scheduleRow, buf []string) []string { return scheduleCells(r, samples, buf) }
	width := make([]int, len(head))
	widen := func(cs []string) {
		for i, c := range cs {
			width[i] = max(width[i], utf8.RuneCountInString(c)) // "µs" is one column wide
		}
	}
	widen(head)
	var buf []string
	for _, r := range rows {
		buf = cells(r, buf)
		widen(buf)
	}
	bw := bufio.NewWriter(w)
	line := func(cs []string) {
		for i, c := range cs {
			for range width[i] + 2 - utf8.RuneCountInString(c) {
				bw.WriteByte(' ')
			}
			bw.WriteString(c)
		}
		bw.WriteByte('\n')
	}
	line(head)
	for _, r := range rows {
		buf = cells(r, buf)
		line(buf)
	}
	return bw.Flush()
}

// scheduleHead is the table's header for samples sample columns.
func scheduleHead(samples int) []string {
	head := []string{"retry", "min", "max"}
	if samples == 1 {
		head = append(head, "sample")
	} else {
		for s := range samples {
			head = append(head, fmt.Sprintf("sample %d", s+1))
		}
	}
	return append(head, "cumulative max")
}

// scheduleCells appends the table's cells of r to buf[:0].
func scheduleCells(r scheduleRow, samples int, buf []string) []string {
	buf = append(buf[:0], strconv.Itoa(r.Retry), fmtMS(r.MinMS), fmtMS(r.MaxMS))
	if samples == 1 {
		buf = append(buf, fmtMS(r.SampleMS))
	} else {
		for _, s := range r.SamplesMS {
			buf = append(buf, fmtMS(s))
		}
	}
	return append(buf, fmtMS(r.CumulativeMaxMS))
}

// writeScheduleJSON writes rows as an indented JSON array, one row at a
// time, byte for byte what json.Encoder with SetIndent("", "  ") writes
// for the whole slice.
func writeScheduleJSON(w io.Writer, rows []scheduleRow) error {
	bw := bufio.NewWriter(w)
	if len(rows) == 0 {
		bw.WriteString("[]\n")
		return bw.Flush()
	}
	bw.WriteString("[\n")
	for i, r := range rows {
		b, err := json.MarshalIndent(r, "  ", "  ")
		if err != nil {
			return err
		}
		bw.WriteString("  ")
		bw.Write(b)
		if i < len(rows)-1 {
			bw.WriteByte(',')
		}
		bw.WriteByte('\n')
	}
	bw.WriteString("]\n")
	return bw.Flush()
}
