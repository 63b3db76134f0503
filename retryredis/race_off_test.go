//go:build !race

package retryredis_test

const raceEnabled = false
