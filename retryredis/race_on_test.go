//go:build race

package retryredis_test

// raceEnabled: the race detector slows the workers several-fold, so the
// timing limits of TestFleetRedisKilled get one more sync interval.
const raceEnabled = true
