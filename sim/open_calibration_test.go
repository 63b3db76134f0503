package sim_test

import (
	"os"
	"testing"

	"github.com/retrykit/retry/sim"
)

// TestHuangCalibration finds, for each of the four published outcomes and
// each arrival process (even; Poisson with seeds 1-3), the service rate at
// which the outcome flips, by bisection to within 10 requests/s, and
// checks that sim.HuangServiceRate lies inside the window they leave,
// with a margin of 200/s on each side. It is how the value was found
// (see the package doc); it takes about two and a half minutes, so it runs only
// with RETRYKIT_CALIBRATE=1:
//
//	RETRYKIT_CALIBRATE=1 go test -run TestHuangCalibration -v ./sim/
func TestHuangCalibration(t *testing.T) {
	if os.Getenv("RETRYKIT_CALIBRATE") != "1" {
		t.Skip("set RETRYKIT_CALIBRATE=1 to run the calibration (about 150 s)")
	}
	lo, hi := 0.0, 1e9 // the window: every outcome as published for lo < rate < hi
	for _, c := range huangCases {
		for _, arr := range []struct {
			a    sim.Arrivals
			seed uint64
		}{{sim.Even, 0}, {sim.Poisson, 1}, {sim.Poisson, 2}, {sim.Poisson, 3}} {
			stuck, recovers := 20000.0, 50000.0
			for recovers-stuck > 10 {
				mid := (stuck + recovers) / 2
				s := sim.Huang()
				c.mod(&s)
				s.Arrivals, s.Seed, s.ServiceRate = arr.a, arr.seed, mid
				if runOpen(t, s).Recovered {
					recovers = mid
				} else {
					stuck = mid
				}
			}
			t.Logf("%-22s %-7v seed %d: stuck at %.0f/s, recovers at %.0f/s", c.name, arr.a, arr.seed, stuck, recovers)
			if c.recovered {
				lo = max(lo, recovers)
			} else {
				hi = min(hi, stuck)
			}
		}
	}
	t.Logf("window: %.0f to %.0f requests/s; HuangServiceRate %d", lo, hi, sim.HuangServiceRate)
	if !(lo+200 <= sim.HuangServiceRate && sim.HuangServiceRate <= hi-200) {
		t.Errorf("HuangServiceRate %d is not inside [%.0f, %.0f] with 200/s to spare", sim.HuangServiceRate, lo, hi)
	}
}
