package bench

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	avast "github.com/avast/retry-go/v4"
	cenkalti "github.com/cenkalti/backoff/v5"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	retryablehttp "github.com/hashicorp/go-retryablehttp"
	sethvargo "github.com/sethvargo/go-retry"

	retry "github.com/retrykit/retry"
)

// probes are the retry numbers (0 = the wait before the first retry) whose
// waits TestOverflow reports.
var probes = []int{62, 63, 64, 100, 1000}

const (
	ovInitial = time.Second
	ovCap     = 32 * time.Second
	noCap     = time.Duration(0)
)

// recordTimer is an avast Timer that records each requested wait and fires at once.
type recordTimer struct{ waits []time.Duration }

func (t *recordTimer) After(d time.Duration) <-chan time.Time {
	t.waits = append(t.waits, d)
	c := make(chan time.Time, 1)
	c <- time.Time{}
	return c
}

// overflowRow is one library configuration: waits returns the wait before
// retries 0..max.
type overflowRow struct {
	lib, config string
	cap         time.Duration // noCap: only negative and zero are defects
	waits       func(t *testing.T, max int) []time.Duration
}

func overflowRows() []overflowRow {
	cenk := func(maxInterval time.Duration) func(*testing.T, int) []time.Duration {
		return func(_ *testing.T, max int) []time.Duration {
			eb := cenkalti.NewExponentialBackOff()
			eb.InitialInterval, eb.Multiplier, eb.MaxInterval = ovInitial, 2, maxInterval
			var out []time.Duration
			for range max + 1 {
				out = append(out, eb.NextBackOff())
			}
			return out
		}
	}
	seth := func(capped bool) func(*testing.T, int) []time.Duration {
		return func(_ *testing.T, max int) []time.Duration {
			b := sethvargo.NewExponential(ovInitial)
			if capped {
				b = sethvargo.WithCappedDuration(ovCap, b)
			}
			var out []time.Duration
			for range max + 1 {
				d, _ := b.Next()
				out = append(out, d)
			}
			return out
		}
	}
	av := func(opts ...avast.Option) func(*testing.T, int) []time.Duration {
		return func(t *testing.T, max int) []time.Duration {
			rt := &recordTimer{}
			opts := append([]avast.Option{avast.Attempts(uint(max + 2)), avast.Delay(ovInitial),
				avast.WithTimer(rt), avast.LastErrorOnly(true)}, opts...)
			n := 0
			avast.Do(func() error {
				if n++; n < max+2 {
					return errTransient
				}
				return nil
			}, opts...)
			return rt.waits
		}
	}
	fs := func(maxDelay time.Duration) func(*testing.T, int) []time.Duration {
		return func(t *testing.T, max int) []time.Duration {
			var out []time.Duration
			synctest.Test(t, func(t *testing.T) {
				rp := retrypolicy.NewBuilder[any]().WithMaxAttempts(max+2).WithBackoff(ovInitial, maxDelay).
					OnRetryScheduled(func(e failsafe.ExecutionScheduledEvent[any]) { out = append(out, e.Delay) }).Build()
				n := 0
				failsafe.With[any](rp).Run(func() error {
					if n++; n < max+2 {
						return errTransient
					}
					return nil
				})
			})
			return out
		}
	}
	rk := func(p retry.Policy) func(*testing.T, int) []time.Duration {
		return func(_ *testing.T, max int) []time.Duration {
			var out []time.Duration
			prev := time.Duration(0)
			for n := 0; n <= max; n++ {
				prev = p.Delay(n, prev, nil)
				out = append(out, prev)
			}
			return out
		}
	}
	return []overflowRow{
		{"retrykit", "zero Policy (1 s, x2, cap 32 s, additive 0..1 s)", ovCap, rk(retry.Policy{})},
		{"retrykit", "FullJitter", ovCap, rk(retry.Policy{Jitter: retry.FullJitter()})},
		{"retrykit", "DecorrelatedJitter", ovCap, rk(retry.Policy{Jitter: retry.DecorrelatedJitter()})},
		{"retrykit", "ProportionalJitter(0.2)", ovCap, rk(retry.Policy{Jitter: retry.ProportionalJitter(0.2)})},
		{"retrykit", "NoJitter, MaxDelay MaxInt64", time.Duration(math.MaxInt64), rk(retry.Policy{Jitter: retry.NoJitter(), MaxDelay: math.MaxInt64})},
		{"cenkalti", "ExponentialBackOff 1 s x2, MaxInterval 32 s, factor 0.5", ovCap * 3 / 2, cenk(ovCap)},
		{"cenkalti", "MaxInterval MaxInt64", noCap, cenk(math.MaxInt64)},
		{"avast", "Delay 1 s, MaxDelay 32 s, default BackOff+Random jitter", ovCap, av(avast.MaxDelay(ovCap))},
		{"avast", "Delay 1 s, no MaxDelay", noCap, av()},
		{"sethvargo", "WithCappedDuration(32 s, NewExponential(1 s))", ovCap, seth(true)},
		{"sethvargo", "NewExponential(1 s), no cap", noCap, seth(false)},
		{"retryablehttp", "DefaultBackoff(1 s, 32 s)", ovCap, func(_ *testing.T, max int) []time.Duration {
			var out []time.Duration
			for n := 0; n <= max; n++ {
				out = append(out, retryablehttp.DefaultBackoff(ovInitial, ovCap, n, nil))
			}
			return out
		}},
		{"retryablehttp", "LinearJitterBackoff(1 s, 32 s)", ovCap, func(_ *testing.T, max int) []time.Duration {
			var out []time.Duration
			for n := 0; n <= max; n++ {
				out = append(out, retryablehttp.LinearJitterBackoff(ovInitial, ovCap, n, nil))
			}
			return out
		}},
		{"failsafe", "WithBackoff(1 s, 32 s)", ovCap, fs(ovCap)},
		{"failsafe", "WithBackoff(1 s, MaxInt64)", noCap, fs(math.MaxInt64)},
	}
}

// verdict classifies one wait.
func verdict(d, limit time.Duration) string {
	switch {
	case d < 0:
		return "NEGATIVE"
	case d == 0:
		return "ZERO"
	case limit != noCap && d > limit:
		return "BEYOND CAP"
	}
	return "ok"
}

func fmtWait(d time.Duration) string {
	if d > 1000*time.Hour || d < -1000*time.Hour {
		return fmt.Sprintf("%.3gh", d.Hours())
	}
	return d.Round(time.Millisecond).String()
}

// TestOverflow records each library's wait before retries 62, 63, 64, 100
// and 1000 with a 1 s x2 schedule, as a Markdown table in the test log. It
// asserts only that retrykit stays within [0, cap] and that every row was
// produced; peers' defects are facts to record.
func TestOverflow(t *testing.T) {
	max := probes[len(probes)-1]
	var sb strings.Builder
	sb.WriteString("\n| library | configuration | cap |")
	for _, n := range probes {
		fmt.Fprintf(&sb, " retry %d |", n)
	}
	sb.WriteString(" defects |\n|---|---|---|")
	for range probes {
		sb.WriteString("---|")
	}
	sb.WriteString("---|\n")
	for _, row := range overflowRows() {
		waits := row.waits(t, max)
		if len(waits) < max+1 {
			t.Fatalf("%s %s: %d waits recorded, want %d", row.lib, row.config, len(waits), max+1)
		}
		capS := "none"
		if row.cap != noCap {
			capS = fmtWait(row.cap)
		}
		fmt.Fprintf(&sb, "| %s | %s | %s |", row.lib, row.config, capS)
		var defects []string
		for _, n := range probes {
			v := verdict(waits[n], row.cap)
			cell := fmtWait(waits[n])
			if v != "ok" {
				cell += " " + v
				defects = append(defects, fmt.Sprintf("%s at %d", v, n))
			}
			fmt.Fprintf(&sb, " %s |", cell)
		}
		// Any defect at any retry 0..1000, not only the probes.
		first := ""
		for n, d := range waits[:max+1] {
			if v := verdict(d, row.cap); v != "ok" {
				first = fmt.Sprintf("first %s at retry %d", v, n)
				break
			}
		}
		if first == "" {
			first = "none in 0..1000"
		}
		fmt.Fprintf(&sb, " %s |\n", first)
		if row.lib == "retrykit" && len(defects) > 0 || row.lib == "retrykit" && first != "none in 0..1000" {
			t.Errorf("retrykit %s: %v %s", row.config, defects, first)
		}
	}
	t.Log(sb.String())
}
