package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"
)

// sameFile reports whether a and b are open on the same file.
func sameFile(a, b *os.File) bool {
	fa, err := a.Stat()
	if err != nil {
		return false
	}
	fb, err := b.Stat()
	return err == nil && os.SameFile(fa, fb)
}

// writeOutput truncates f, writes it with write and closes it.
func writeOutput(f *output, write func(io.Writer) error) error {
	if err := f.truncate(); err != nil {
		return fmt.Errorf("simulate: %s: %w", f.name, err)
	}
	if err := write(f.f); err != nil {
		return err
	}
	if err := f.f.Close(); err != nil {
		return fmt.Errorf("simulate: %s: %w", f.name, err)
	}
	return nil
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

type jsonRow struct {
	Strategy           string   `json:"strategy"`
	Model              string   `json:"model"`
	Clients            int      `json:"clients"`
	Trials             int      `json:"trials"`
	Requests           float64  `json:"requests"`
	Succeeded          float64  `json:"succeeded"`
	GaveUp             float64  `json:"gave_up"`
	RequestsPerSuccess *float64 `json:"requests_per_success"`
	P50                *float64 `json:"completion_p50_ms"` // null when no client succeeded
	P99                *float64 `json:"completion_p99_ms"`
	Max                *float64 `json:"completion_max_ms"`
	PeakLoad           float64  `json:"peak_load"`
	Capacity           int      `json:"capacity,omitempty"`
	SlotMS             float64  `json:"slot_ms"`
	Retries            float64  `json:"retries"`
	Processes          int      `json:"processes"`
	Budget             string   `json:"budget,omitempty"`
	BudgetRefused      float64  `json:"budget_refused"`
}

func writeJSON(w io.Writer, res []strategyResult) error {
	rows := make([]jsonRow, 0, len(res))
	for _, r := range res {
		x := r.Result
		var rps *float64
		if !math.IsInf(x.RequestsPerSuccess, 0) {
			v := x.RequestsPerSuccess
			rps = &v
		}
		model := "capacity"
		if x.Capacity == 0 {
			model = "contention"
		}
		completion := func(d time.Duration) *float64 {
			if x.Succeeded == 0 {
				return nil // no completion time to report, not 0
			}
			v := ms(d)
			return &v
		}
		rows = append(rows, jsonRow{r.Name, model, x.Clients, x.Trials, x.Requests, x.Succeeded, x.GaveUp, rps,
			completion(x.CompletionP50), completion(x.CompletionP99), completion(x.CompletionMax), x.PeakLoad, x.Capacity, ms(x.Slot),
			x.Requests - float64(x.Clients), x.Processes, x.Budget, x.BudgetRefused})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

func writeTable(w io.Writer, res []strategyResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	budget := res[0].Result.Budget != ""
	head := "strategy\trequests\treq/success\tsucceeded\tgave up\tp50\tp99\tmax\tpeak/slot\t"
	if budget {
		head += "retries\tbudget refused\t"
	}
	fmt.Fprintln(tw, head)
	for _, r := range res {
		x := r.Result
		rps := "-"
		if !math.IsInf(x.RequestsPerSuccess, 0) {
			rps = fmt.Sprintf("%.2f", x.RequestsPerSuccess)
		}
		peak := fmt.Sprintf("%.0f", x.PeakLoad)
		if x.Capacity > 0 {
			peak = fmt.Sprintf("%.0f (%.1fx)", x.PeakLoad, x.PeakLoad/float64(x.Capacity))
		}
		completion := func(d time.Duration) string {
			if x.Succeeded == 0 {
				return "-" // no client completed: no time, not 0s
			}
			return roundDur(d).String()
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t", r.Name, x.Requests, rps, x.Succeeded, x.GaveUp,
			completion(x.CompletionP50), completion(x.CompletionP99), completion(x.CompletionMax), peak)
		if budget {
			fmt.Fprintf(tw, "%.0f\t%.0f\t", x.Requests-float64(x.Clients), x.BudgetRefused)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// progress draws a bar on stderr when it is a terminal and the run has
// lasted over a second.
type progress struct {
	w     io.Writer
	on    bool
	start time.Time
	total int64
	shown bool
	last  int
}

func newProgress(w io.Writer, total int64) *progress {
	p := &progress{w: w, total: total, start: time.Now()}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.on = true
	}
	return p
}

func (p *progress) update(done int64) {
	if !p.on || p.total <= 0 || time.Since(p.start) < time.Second {
		return
	}
	pct := int(100 * done / p.total)
	if p.shown && pct == p.last {
		return
	}
	p.shown, p.last = true, pct
	n := pct * 30 / 100
	fmt.Fprintf(p.w, "\rsimulating [%s%s] %3d%%", strings.Repeat("#", n), strings.Repeat(".", 30-n), pct)
}

func (p *progress) clear() {
	if p.shown {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", 48))
		p.shown = false
	}
}
