package retryhttp_test

import (
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/retryhttp"
)

// checkHint fails unless ParseHint of h is consistent: a wait never
// negative, a hint only from a field present in h, a Value read from that
// field's value, no hint without a field.
func checkHint(t *testing.T, h http.Header) retryhttp.Hint {
	t.Helper()
	got, ok := retryhttp.ParseHint(h, hintNow)
	if !ok {
		if got != (retryhttp.Hint{}) {
			t.Fatalf("ParseHint(%q) = %+v, false", h, got)
		}
		return got
	}
	if got.Wait < 0 || got.Field == "" {
		t.Fatalf("ParseHint(%q) = %+v", h, got)
	}
	vs := h.Values(got.Field)
	found := false
	for _, v := range vs {
		found = found || strings.Contains(v, got.Value)
	}
	if !found || got.Value == "" {
		t.Fatalf("ParseHint(%q) = %+v: value not in the field", h, got)
	}
	return got
}

// FuzzHintMillis: retry-after-ms and x-ms-retry-after-ms.
func FuzzHintMillis(f *testing.F) {
	for _, s := range []string{"1500", "1200", "0", "250.5", "-1500", "NaN", "+Inf", "1e3", "999999999999999", "1234567890123456", "1.0123456789", "15."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, name := range []string{"retry-after-ms", "x-ms-retry-after-ms"} {
			got := checkHint(t, http.Header{http.CanonicalHeaderKey(name): {s}})
			if got.Field != "" && (s[0] < '0' || s[0] > '9') {
				t.Fatalf("%s: %q read as %v", name, s, got.Wait)
			}
		}
	})
}

// FuzzHintRateLimit: the IETF RateLimit field (RFC 9651 syntax), on one or
// two lines.
func FuzzHintRateLimit(f *testing.F) {
	for _, s := range []string{
		`"default";r=0;t=2`, `"burst";r=0;t=30, "daily";r=900;t=3600`, `"default";r=5;t=4`,
		`"daily";r=0;t=90;pk=:dXNlcjE=:`, `"a";r=0;t=9;x=?1;y=1.5;z=tok/en;d=@1700000000;s=%"caf%c3%a9", (1 2);r=0;t=99`,
		`"d";r=-1;t=2`, `"d";r=0;t=2.5`, `"d";r=0;t=2,`, `"d;r=0;t=2`, `d;r=0;t=2`, "limit=10, remaining=0, reset=5",
		`"d";r=0;t=1000000000000000`, `"d";r=0;t=2;s=%"%ff"`,
	} {
		f.Add(s, "")
	}
	f.Add(`"burst";r=3;t=30`, `"daily";r=0;t=90`)
	f.Fuzz(func(t *testing.T, a, b string) {
		h := http.Header{"Ratelimit": {a}}
		if b != "" {
			h["Ratelimit"] = append(h["Ratelimit"], b)
		}
		got := checkHint(t, h)
		if got.Field != "" && (got.Field != "RateLimit" || strings.Trim(got.Value, "0123456789") != "" || len(got.Value) > 15) {
			t.Fatalf("RateLimit %q %q read as %+v", a, b, got)
		}
		if got.Field != "" && got.Wait != math.MaxInt64 && got.Wait%time.Second != 0 {
			t.Fatalf("RateLimit %q %q: t of %v is not whole seconds", a, b, got.Wait)
		}
	})
}

// FuzzHintReset: X-RateLimit-Reset and RateLimit-Reset with a remaining of
// 0, read by magnitude.
func FuzzHintReset(f *testing.F) {
	for _, s := range []string{"1765094403", "1765094402.250", "1765094401500", "42", "999999999", "1000000000", "999999999999",
		"1000000000000", "999999999999999", "1000000000000000", "-3", "NaN", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range []string{"X-Ratelimit-", "Ratelimit-"} {
			checkHint(t, http.Header{p + "Remaining": {"0"}, p + "Reset": {s}})
			if got := checkHint(t, http.Header{p + "Remaining": {"1"}, p + "Reset": {s}}); got.Field != "" {
				t.Fatalf("%q read with quota left: %+v", s, got)
			}
		}
	})
}

// FuzzHintDimension: the per-dimension resets (Go durations, RFC 3339
// times, numbers), paired with their remaining.
func FuzzHintDimension(f *testing.F) {
	for _, s := range []string{"6m0s", "1s", "7.66s", "2m59.56s", "33011.382867", "2026-12-07T08:00:20Z", "2026-12-07T09:00:05+01:00",
		"-6m0s", "soon", "2026-13-07T08:00:20Z", "1e3s", ""} {
		f.Add(s, "tokens")
	}
	f.Add("6m0s", "requests-day")
	f.Fuzz(func(t *testing.T, s, dim string) {
		checkHint(t, http.Header{http.CanonicalHeaderKey("x-ratelimit-remaining-" + dim): {"0"}, http.CanonicalHeaderKey("x-ratelimit-reset-" + dim): {s}})
		checkHint(t, http.Header{http.CanonicalHeaderKey("anthropic-ratelimit-" + dim + "-remaining"): {"0"}, http.CanonicalHeaderKey("anthropic-ratelimit-" + dim + "-reset"): {s}})
	})
}
