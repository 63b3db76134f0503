//go:build race

package sim_test

// raceEnabled reports a -race build, in which the full-scale open-model
// runs (seconds each without it, minutes with it) are left to the run
// without -race that scripts/test-all.sh makes.
const raceEnabled = true
