package retryhttp

import (
	"net/http"
	"time"
)

// maxRetryAfterSeconds bounds delta-seconds so that the conversion to a
// time.Duration cannot overflow.
const maxRetryAfterSeconds = int64(1<<63-1) / int64(time.Second)

// ParseRetryAfter parses the value of a Retry-After header (RFC 9110
// 10.2.3): either delta-seconds (ASCII digits only) or an HTTP-date in any
// of the three forms that http.ParseTime accepts. It returns the wait the
// server asks for, relative to now, and whether value was valid. A date in
// the past gives (0, true). Empty, negative, fractional, garbage and
// overflowing values give (0, false). It never panics.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	if value == "" {
		return 0, false
	}
	if c := value[0]; c >= '0' && c <= '9' {
		var n int64
		for i := 0; i < len(value); i++ {
			c := value[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int64(c-'0')
			if n > maxRetryAfterSeconds {
				return 0, false
			}
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now) // saturates, never overflows
	if d < 0 {
		d = 0
	}
	return d, true
}
