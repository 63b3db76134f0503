//go:build !race

package retryvalkey_test

const raceEnabled = false
