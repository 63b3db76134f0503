package main

import (
	"strings"
	"testing"
)

// FuzzParseJitter: any --jitter value either parses into a jitter that
// passes Policy validation or gives a one-line error; never a panic.
func FuzzParseJitter(f *testing.F) {
	for _, s := range []string{"none", "full", "equal", "decorrelated", "additive", "additive:250ms",
		"additive:-1s", "proportional:0.2", "proportional:2", "proportional:NaN", "", ":", "full:1s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		j, err := parseJitter(s)
		if err != nil {
			if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") {
				t.Fatalf("parseJitter(%q): error %q is not one line", s, msg)
			}
			return
		}
		if j.String() == "invalid" {
			t.Fatalf("parseJitter(%q) accepted an invalid jitter", s)
		}
	})
}

// FuzzParseExitCodes: --on-exit either yields codes in 1..255 or a one-line
// error.
func FuzzParseExitCodes(f *testing.F) {
	for _, s := range []string{"1", "75,100-110", "0", "256", "5-3", "1-255", "a", ",", "-", "1,,2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		codes, err := parseExitCodes(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("parseExitCodes(%q): multi-line error", s)
			}
			return
		}
		for c := range codes {
			if c < 1 || c > 255 {
				t.Fatalf("parseExitCodes(%q) accepted code %d", s, c)
			}
		}
	})
}
