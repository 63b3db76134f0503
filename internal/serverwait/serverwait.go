// Package serverwait holds the arithmetic that the integration modules
// apply to a wait a server asked for (Retry-After, x-amz-retry-after, a
// gRPC pushback): jitter and saturating sums. Standard library only.
package serverwait

import (
	"math"
	"math/rand/v2"
	"time"
)

// Jitter adds a uniform random 0..min(1 s, d/10) to a server's wait d, so
// that clients told the same wait do not return in one wave; the sum
// saturates at math.MaxInt64. A d below 10 ns is returned as it is.
func Jitter(d time.Duration) time.Duration {
	j := min(time.Second, d/10)
	if j <= 0 {
		return d
	}
	j = rand.N(j + 1)
	if d > math.MaxInt64-j {
		return math.MaxInt64
	}
	return d + j
}

// AddSat returns a + b for non-negative a and b, saturating at
// math.MaxInt64 instead of overflowing.
func AddSat(a, b time.Duration) time.Duration {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}

// Beyond reports whether a server's wait d is more than the cap honours:
// longer than it, or saturated at the longest Duration (a hint the parsers
// could not hold), which counts as more than any cap, MaxInt64 included.
func Beyond(d, cap time.Duration) bool {
	return d > cap || d == math.MaxInt64
}
