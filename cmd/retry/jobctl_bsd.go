//go:build unix && !linux

package main

// setSubreaper: only Linux has subreapers; orphans go to init, which reaps them.
func setSubreaper() {}

// reapGroup: nothing to reap without a subreaper.
func reapGroup(int) {}

// waitStopped: without waitid(WNOWAIT) here, stops are not passed on; it
// reports none.
func waitStopped(int) bool { return false }
