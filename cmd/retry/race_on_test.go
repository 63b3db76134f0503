//go:build race

package main

// raceEnabled reports a -race build, in which the full-scale open-model
// runs (a second each without it, half a minute with it) are left to the
// run without -race that scripts/test-all.sh makes.
const raceEnabled = true
