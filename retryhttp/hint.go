package retryhttp

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/retrykit/retry"
)

// Hint is a wait that a server asked for in a response header, and the
// header that asked for it. [ParseHint] reads one from a response's
// header; [WaitHint] tells an Observer which one set a wait. The zero Hint
// is no hint.
type Hint struct {
	// Field names the header field that set the wait, spelt as in the
	// table of docs/http.md: "Retry-After", "retry-after-ms",
	// "x-ms-retry-after-ms", "RateLimit", "X-RateLimit-Reset",
	// "RateLimit-Reset", or, for the per-dimension forms, the field's
	// canonical name as received ("X-Ratelimit-Reset-Tokens").
	Field string
	// Value is the part of the field's value that was read: the whole
	// value, or for RateLimit the digits of the t parameter.
	Value string
	// Wait is the time from now until the moment the server named;
	// never negative. A wait too long for a time.Duration saturates at
	// its largest value, which counts as more than any MaxServerWait.
	Wait time.Duration
}

// String returns the field and the value read, as the CLI prints them:
// "RateLimit t=2", "retry-after-ms 1500", "Retry-After 3".
func (h Hint) String() string {
	if h.Field == "" {
		return ""
	}
	if h.Field == fieldRateLimit {
		return h.Field + " t=" + h.Value
	}
	return h.Field + " " + h.Value
}

// Names of the hint fields, as Hint.Field spells them, and their
// canonical keys in an http.Header.
const (
	fieldRetryAfter      = "Retry-After"
	fieldRetryAfterMs    = "retry-after-ms"
	fieldMsRetryAfterMs  = "x-ms-retry-after-ms"
	fieldRateLimit       = "RateLimit"
	fieldXRateLimitReset = "X-RateLimit-Reset"
	fieldRateLimitReset  = "RateLimit-Reset"

	keyRetryAfterMs       = "Retry-After-Ms"
	keyMsRetryAfterMs     = "X-Ms-Retry-After-Ms"
	keyRateLimit          = "Ratelimit"
	keyXRateLimitReset    = "X-Ratelimit-Reset"
	keyXRateLimitRemain   = "X-Ratelimit-Remaining"
	keyRateLimitReset     = "Ratelimit-Reset"
	keyRateLimitRemaining = "Ratelimit-Remaining"
)

// ParseHint reads the wait a response's header asks for, from the first
// of these that is present and valid, in this order of precedence:
//
//  1. Retry-After (delta-seconds or an HTTP-date, see [ParseRetryAfter]);
//  2. retry-after-ms, then x-ms-retry-after-ms (milliseconds);
//  3. RateLimit (IETF draft-ietf-httpapi-ratelimit-headers, Structured
//     Fields): the t of the item whose r is 0 (the longest, if several),
//     or of the only item;
//  4. X-RateLimit-Reset, then RateLimit-Reset, when the matching
//     X-RateLimit-Remaining or RateLimit-Remaining is 0: delta seconds
//     below 10^9, Unix seconds below 10^12, Unix milliseconds below 10^15;
//  5. the per-dimension resets (x-ratelimit-reset-DIM, and
//     anthropic-ratelimit-DIM-reset) whose matching remaining is 0: a Go
//     duration ("6m0s"), an RFC 3339 time, or a number read as in 4; the
//     longest, if several dimensions are spent.
//
// Malformed, negative and NaN values, and numbers of more than 15 integer
// digits, are ignored: the next field in the order is read. A time in
// the past gives a wait of 0. now is the time the response arrived. The
// zero Hint and false mean no hint. It never panics, and allocates
// nothing but the time zone of an RFC 3339 time with a numeric offset.
func ParseHint(h http.Header, now time.Time) (Hint, bool) {
	return readHint(h, now, false)
}

// readHint is ParseHint; with spentOnly it reads only the hints that say a
// quota is spent (RateLimit with r=0, a remaining of 0 with its reset),
// which the Pacer holds requests for.
func readHint(h http.Header, now time.Time, spentOnly bool) (Hint, bool) {
	if len(h) == 0 {
		return Hint{}, false
	}
	if !spentOnly {
		if v := first(h, "Retry-After"); v != "" {
			if d, ok := ParseRetryAfter(v, now); ok {
				return Hint{Field: fieldRetryAfter, Value: v, Wait: d}, true
			}
		}
		for _, f := range [...]struct{ key, field string }{{keyRetryAfterMs, fieldRetryAfterMs}, {keyMsRetryAfterMs, fieldMsRetryAfterMs}} {
			if v := first(h, f.key); v != "" {
				if d, ok := parseMillis(v); ok {
					return Hint{Field: f.field, Value: v, Wait: d}, true
				}
			}
		}
	}
	if v := h[keyRateLimit]; len(v) != 0 {
		if rl, ok := parseRateLimit(v); ok {
			t, ok := rl.spentT, rl.spent
			if !ok && !spentOnly && rl.items == 1 && rl.onlyHasT {
				t, ok = rl.onlyT, true
			}
			if ok {
				return Hint{Field: fieldRateLimit, Value: t, Wait: delaySeconds(t)}, true
			}
		}
	}
	for _, f := range [...]struct{ reset, remaining, field string }{
		{keyXRateLimitReset, keyXRateLimitRemain, fieldXRateLimitReset},
		{keyRateLimitReset, keyRateLimitRemaining, fieldRateLimitReset},
	} {
		if v := first(h, f.reset); v != "" && isZero(first(h, f.remaining)) {
			if d, ok := parseReset(v, now); ok {
				return Hint{Field: f.field, Value: v, Wait: d}, true
			}
		}
	}
	return dimensionHint(h, now)
}

// first returns the first value of the canonical key in h, or "".
func first(h http.Header, key string) string {
	if v := h[key]; len(v) != 0 {
		return v[0]
	}
	return ""
}

// isZero reports whether v is a remaining count of 0: one or more ASCII
// zeros.
func isZero(v string) bool {
	return v != "" && strings.Trim(v, "0") == ""
}

// Prefixes and suffixes of the per-dimension fields, in canonical form.
const (
	dimReset      = "X-Ratelimit-Reset-"
	dimRemaining  = "X-Ratelimit-Remaining-"
	anthPrefix    = "Anthropic-Ratelimit-"
	anthReset     = "-Reset"
	anthRemaining = "-Remaining"
)

// dimensionHint returns the longest reset of a dimension whose remaining
// is 0, in the two per-dimension spellings: X-Ratelimit-Reset-DIM with
// X-Ratelimit-Remaining-DIM (OpenAI and others), and
// Anthropic-Ratelimit-DIM-Reset with Anthropic-Ratelimit-DIM-Remaining.
func dimensionHint(h http.Header, now time.Time) (Hint, bool) {
	var best Hint
	found := false
	var buf [96]byte // the matching remaining key, built without allocating
	for k, vs := range h {
		if len(vs) == 0 || len(k) > len(buf)-len(anthRemaining) {
			continue
		}
		var rem []byte
		switch {
		case strings.HasPrefix(k, dimReset) && len(k) > len(dimReset):
			rem = append(append(buf[:0], dimRemaining...), k[len(dimReset):]...)
		case strings.HasPrefix(k, anthPrefix) && strings.HasSuffix(k, anthReset) && len(k) > len(anthPrefix)+len(anthReset):
			rem = append(append(buf[:0], k[:len(k)-len(anthReset)]...), anthRemaining...)
		default:
			continue
		}
		r := h[string(rem)] // no allocation: the compiler looks the bytes up
		if len(r) == 0 || !isZero(r[0]) {
			continue
		}
		d, ok := parseDimensionReset(vs[0], now)
		if ok && (!found || d > best.Wait || d == best.Wait && k < best.Field) {
			best, found = Hint{Field: k, Value: vs[0], Wait: d}, true
		}
	}
	return best, found
}

// parseDimensionReset reads a per-dimension reset: a Go duration ("6m0s",
// "1.5s"), an RFC 3339 time, or a number as parseReset reads it.
func parseDimensionReset(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if c := v[len(v)-1]; c == 's' || c == 'm' || c == 'h' {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || v[0] == '-' || v[0] == '+' {
			return 0, false
		}
		return d, true
	}
	if len(v) >= len("2006-01-02T15:04:05Z") && v[4] == '-' {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return 0, false
		}
		return max(t.Sub(now), 0), true
	}
	return parseReset(v, now)
}

// Magnitudes that tell a reset's unit (see parseReset).
const (
	unixSecondsFrom = 1e9  // 2001-09-09T01:46:40Z in Unix seconds
	unixMillisFrom  = 1e12 // the same instant in Unix milliseconds
	maxIntDigits    = 15   // as an RFC 9651 Integer: more is absurd
)

// parseReset reads a reset value by its magnitude: a non-negative decimal
// number below 10^9 is delta seconds (up to about 31 years), one below
// 10^12 Unix seconds (from 2001-09-09), one below 10^15 Unix milliseconds
// (from the same instant). A time in the past gives 0.
func parseReset(v string, now time.Time) (time.Duration, bool) {
	n, frac, ok := parseDecimal(v)
	if !ok {
		return 0, false
	}
	switch {
	case n < unixSecondsFrom:
		return time.Duration(n)*time.Second + frac, true // at most 10^18 ns: no overflow
	case n < unixMillisFrom:
		return max(time.Unix(int64(n), int64(frac)).Sub(now), 0), true
	}
	ms := time.UnixMilli(int64(n)).Add(frac / 1000)
	return max(ms.Sub(now), 0), true
}

// parseMillis reads retry-after-ms and x-ms-retry-after-ms: non-negative
// milliseconds, a fraction allowed; a wait too long for a Duration
// saturates.
func parseMillis(v string) (time.Duration, bool) {
	n, frac, ok := parseDecimal(v)
	if !ok {
		return 0, false
	}
	if n > uint64(maxDuration/time.Millisecond) {
		return maxDuration, true
	}
	return satAdd(time.Duration(n)*time.Millisecond, frac/1000), true
}

// parseDecimal reads ASCII digits, at most maxIntDigits of them, with an
// optional fraction of 1 to 9 digits: the integer part and the fraction as
// nanoseconds of one unit. Signs, spaces, exponents, "NaN" and "Inf" are
// refused.
func parseDecimal(v string) (n uint64, frac time.Duration, ok bool) {
	i := 0
	for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
		if i == maxIntDigits {
			return 0, 0, false
		}
		n = n*10 + uint64(v[i]-'0')
	}
	if i == 0 {
		return 0, 0, false
	}
	if i == len(v) {
		return n, 0, true
	}
	if v[i] != '.' || i+1 == len(v) || len(v)-i-1 > 9 {
		return 0, 0, false
	}
	scale := time.Duration(1e8)
	for _, c := range []byte(v[i+1:]) {
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		frac += time.Duration(c-'0') * scale
		scale /= 10
	}
	return n, frac, true
}

// delaySeconds turns the digits of an RFC 9651 Integer (at most 15, which
// parseRateLimit has checked) into seconds.
func delaySeconds(digits string) time.Duration {
	var n int64
	for _, c := range []byte(digits) {
		n = n*10 + int64(c-'0')
	}
	if n > int64(maxDuration/time.Second) {
		return maxDuration
	}
	return time.Duration(n) * time.Second
}

// WaitHint reports the server hint that set the wait e announces: for an
// EventRetry of a [Transport] whose wait is the hint's (the hint, with its
// jitter, was longer than the policy's own wait), and for an EventHeld of
// a [Pacer]. It returns false for every other event, and for a retry
// whose wait the policy set. Observers use it to say which header they
// obeyed: the CLI's "retrying in 2s (RateLimit t=2)", retryotel's
// retry.hint attribute.
func WaitHint(e retry.Event) (Hint, bool) {
	switch e.Kind {
	case retry.EventRetry:
		var se *statusError
		if !errors.As(e.Err, &se) || se.hint.Field == "" {
			return Hint{}, false
		}
		if ra, ok := retry.ServerWaitOf(e.Err); !ok || ra != e.Delay {
			return Hint{}, false
		}
		return se.hint, true
	case retry.EventHeld:
		var he *HoldError
		if errors.As(e.Err, &he) {
			return he.Hint, true
		}
	}
	return Hint{}, false
}
