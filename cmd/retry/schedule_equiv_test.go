package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/retrykit/retry"
)

// The table and the JSON are written row by row; they must be byte for
// byte what text/tabwriter and json.Encoder write holding the whole
// output, for schedules of every shape (µs cells, saturated sums, 1 and
// many samples, no rows).
func TestScheduleStreamingMatchesBuffered(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	policies := []retry.Policy{
		{}, {Jitter: retry.NoJitter(), MaxAttempts: 5}, {Initial: 3 * time.Microsecond, MaxAttempts: 30, Jitter: retry.FullJitter()},
		{MaxAttempts: retry.Unlimited, MaxDelay: 1<<63 - 1, Initial: time.Hour}, {MaxAttempts: 1},
		{Jitter: retry.DecorrelatedJitter(), MaxAttempts: 40, Initial: time.Millisecond},
	}
	for _, p := range policies {
		for _, samples := range []int{1, 3} {
			rows, _, ok := schedule(p, samples, rng)
			if !ok {
				t.Fatalf("%+v: refused", p)
			}
			var got, want bytes.Buffer
			if err := writeSchedule(&got, rows, samples); err != nil {
				t.Fatal(err)
			}
			bufferedTable(&want, rows, samples)
			if got.String() != want.String() {
				t.Errorf("%+v, %d samples: table\n%s\nwant\n%s", p, samples, got.String(), want.String())
			}
			got.Reset()
			want.Reset()
			if err := writeScheduleJSON(&got, rows); err != nil {
				t.Fatal(err)
			}
			enc := json.NewEncoder(&want)
			enc.SetIndent("", "  ")
			enc.Encode(rows)
			if got.String() != want.String() {
				t.Errorf("%+v, %d samples: JSON\n%s\nwant\n%s", p, samples, got.String(), want.String())
			}
		}
	}
	var got bytes.Buffer
	writeScheduleJSON(&got, nil)
	if got.String() != "[]\n" {
		t.Errorf("no rows: %q", got.String())
	}
}

// bufferedTable is the table as text/tabwriter aligns it, holding it all.
func bufferedTable(w *bytes.Buffer, rows []scheduleRow, samples int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(scheduleHead(samples), "\t")+"\t")
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(scheduleCells(r, samples, nil), "\t")+"\t")
	}
	tw.Flush()
}
