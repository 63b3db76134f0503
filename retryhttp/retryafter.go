package retryhttp

import (
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/retrykit/retry"
)

// maxDuration is the longest time.Duration, about 292 years.
const maxDuration = time.Duration(1<<63 - 1)

// maxRetryAfterSeconds is the largest delta-seconds that a time.Duration
// holds.
const maxRetryAfterSeconds = int64(maxDuration / time.Second)

// ParseRetryAfter parses the value of a Retry-After header (RFC 9110
// 10.2.3): either delta-seconds (ASCII digits only) or an HTTP-date in any
// of the three forms that http.ParseTime accepts. It returns the wait the
// server asks for, relative to now, and whether value was valid. A date in
// the past gives (0, true). A wait longer than a time.Duration holds
// (delta-seconds above 9223372036, a date more than about 292 years
// ahead) saturates: it gives the largest Duration, math.MaxInt64, and
// true; a [Transport] treats that as more than any MaxServerWait. Empty,
// negative, fractional and garbage values give (0, false). The result is
// never negative, and it never panics.
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
			if n <= maxRetryAfterSeconds {
				n = n*10 + int64(c-'0') // at most 10 × 9223372036 + 9: no overflow
			}
		}
		if n > maxRetryAfterSeconds {
			return maxDuration, true
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

// retryAfterJitter returns a uniform random 0..min(1 s, d/10).
func retryAfterJitter(d time.Duration) time.Duration {
	j := min(time.Second, d/10)
	if j <= 0 {
		return 0
	}
	return rand.N(j + 1)
}

// satAdd returns a + b for non-negative a and b, saturating at maxDuration.
func satAdd(a, b time.Duration) time.Duration {
	if a > maxDuration-b {
		return maxDuration
	}
	return a + b
}

// hinted returns e, the error of the retryable response resp, marked with
// retry.After for the wait that resp's hints ask for (see ParseHint) plus
// retryAfterJitter, and records the hint in e. over reports a wait longer
// than the Transport's MaxServerWait (or than a Duration holds), which is
// not honoured: the caller returns the response instead. With a negative
// MaxServerWait, hints are ignored.
func (t *Transport) hinted(resp *http.Response, e *statusError) (err error, over bool) {
	max := t.maxServerWait()
	if max <= 0 {
		return e, false
	}
	h, ok := ParseHint(resp.Header, time.Now())
	if !ok {
		return e, false
	}
	if h.Wait > max || h.Wait == maxDuration {
		return e, true
	}
	e.hint = h
	return retry.ServerWait(e, satAdd(h.Wait, retryAfterJitter(h.Wait))), false
}
