package serverwait

import (
	"math"
	"testing"
	"time"
)

func TestJitter(t *testing.T) {
	for _, tc := range []struct{ d, lo, hi time.Duration }{
		{0, 0, 0},
		{9, 9, 9},
		{10, 10, 11},
		{time.Second, time.Second, 1100 * time.Millisecond},
		{time.Hour, time.Hour, time.Hour + time.Second},
		{math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{math.MaxInt64 - 1, math.MaxInt64 - 1, math.MaxInt64},
	} {
		for range 100 {
			if got := Jitter(tc.d); got < tc.lo || got > tc.hi {
				t.Fatalf("Jitter(%v) = %v, want in [%v, %v]", tc.d, got, tc.lo, tc.hi)
			}
		}
	}
}

func TestAddSat(t *testing.T) {
	if got := AddSat(math.MaxInt64-1, 2); got != math.MaxInt64 {
		t.Fatalf("AddSat overflowed: %v", got)
	}
	if got := AddSat(time.Second, time.Second); got != 2*time.Second {
		t.Fatalf("AddSat(1s, 1s) = %v", got)
	}
}

func TestBeyond(t *testing.T) {
	for _, tc := range []struct {
		d, cap time.Duration
		want   bool
	}{
		{time.Second, time.Minute, false},
		{time.Minute, time.Minute, false},
		{time.Minute + 1, time.Minute, true},
		{math.MaxInt64 - 1, math.MaxInt64, false},
		{math.MaxInt64, math.MaxInt64, true}, // saturated: more than any cap
	} {
		if got := Beyond(tc.d, tc.cap); got != tc.want {
			t.Errorf("Beyond(%v, %v) = %v, want %v", tc.d, tc.cap, got, tc.want)
		}
	}
}
