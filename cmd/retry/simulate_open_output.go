package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"

	"github.com/retrykit/retry/sim"
)

// title describes scenario s for a plot.
func (oo *openOptions) title(s sim.OpenScenario) string {
	t := fmt.Sprintf("%.0f calls/s (%v), server %.0f/s, timeout %v", s.Rate, s.Arrivals, s.ServiceRate, s.Timeout)
	if s.TriggerFor > 0 {
		t += fmt.Sprintf(", capacity × %.2g for %v from %v", s.TriggerCapacity, s.TriggerFor, s.TriggerAt)
	}
	if oo.scenario != "" {
		t = oo.scenario + ": " + t
	}
	return t
}

// openJSON is one strategy's row of --format json.
type openJSON struct {
	Strategy          string   `json:"strategy"`
	Model             string   `json:"model"`
	Scenario          string   `json:"scenario,omitempty"`
	ArrivalsPerSecond float64  `json:"arrivals_per_second"`
	OfferedPerSecond  float64  `json:"offered_per_second"`
	GoodputPerSecond  float64  `json:"goodput_per_second"`
	Amplification     float64  `json:"amplification"`
	Recovered         *bool    `json:"recovered"` // null: cannot tell
	RecoverySeconds   *float64 `json:"recovery_seconds"`
	PeakQueue         int64    `json:"peak_queue"`
	Arrivals          int64    `json:"arrivals"`
	Sent              int64    `json:"sent"`
	Throttled         int64    `json:"throttled"`
	Rejected          int64    `json:"rejected"`
	Served            int64    `json:"served"`
	Goodput           int64    `json:"goodput"`
	Wasted            int64    `json:"wasted"`
	Succeeded         int64    `json:"succeeded"`
	GaveUp            int64    `json:"gave_up"`
	BudgetRefused     int64    `json:"budget_refused"`
	Processes         int      `json:"processes"`
	Budget            string   `json:"budget,omitempty"`
	Throttle          string   `json:"throttle,omitempty"`
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// recovered is the verdict for JSON: true, false, or nil (null) where
// the run cannot tell.
func recovered(r sim.OpenResult) *bool {
	if r.CannotTell {
		return nil
	}
	return &r.Recovered
}

func recoverySeconds(r sim.OpenResult) *float64 {
	if !r.Recovered {
		return nil
	}
	v := r.RecoveryTime.Seconds()
	return &v
}

func writeOpenJSON(w io.Writer, scenario string, runs []openRun) error {
	rows := make([]openJSON, 0, len(runs))
	for _, r := range runs {
		x := r.Result
		rows = append(rows, openJSON{r.Name, "open", scenario, round3(x.ArrivalsPerSecond), round3(x.OfferedPerSecond),
			round3(x.GoodputPerSecond), round3(x.Amplification), recovered(x), recoverySeconds(x), x.PeakQueue,
			x.Total.Arrivals, x.Total.Sent, x.Total.Throttled, x.Total.Rejected, x.Total.Served, x.Total.Goodput,
			x.Total.Wasted, x.Succeeded, x.GaveUp, x.BudgetRefused, x.Processes, x.Budget, x.Throttle})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

func writeOpenTable(w io.Writer, runs []openRun) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tarrivals/s\toffered/s\tgoodput/s\tamplification\trecovered\tafter\tpeak queue\twasted\t")
	for _, r := range runs {
		x := r.Result
		rec, after := "no", "-"
		switch {
		case x.CannotTell:
			rec = "cannot tell"
		case x.Recovered:
			rec, after = "yes", x.RecoveryTime.String()
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.2f\t%s\t%s\t%d\t%d\t\n", r.Name, x.ArrivalsPerSecond, x.OfferedPerSecond,
			x.GoodputPerSecond, x.Amplification, rec, after, x.PeakQueue, x.Total.Wasted)
	}
	return tw.Flush()
}

// writeOpenCSV writes one row per slot: its start in seconds, then for
// each strategy the slot's arrivals, attempts sent, throttled, rejected,
// served, goodput, wasted work and queue length.
func writeOpenCSV(f io.Writer, runs []openRun) error {
	w := bufio.NewWriter(f)
	w.WriteString("time_s")
	for _, r := range runs {
		for _, c := range []string{"arrivals", "sent", "throttled", "rejected", "served", "goodput", "wasted", "queue"} {
			w.WriteString("," + r.Name + "_" + c)
		}
	}
	w.WriteString("\n")
	slot := runs[0].Result.Slot
	for k := range runs[0].Result.Series {
		w.WriteString(strconv.FormatFloat(float64(k)*slot.Seconds(), 'f', -1, 64))
		for _, r := range runs {
			x := r.Result.Series[k]
			for _, v := range []int64{x.Arrivals, x.Sent, x.Throttled, x.Rejected, x.Served, x.Goodput, x.Wasted, x.Queue} {
				w.WriteString("," + strconv.FormatInt(v, 10))
			}
		}
		w.WriteString("\n")
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	return nil
}
