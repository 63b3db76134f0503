package retry_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

func TestValidate(t *testing.T) {
	called := false
	op := func(context.Context) error { called = true; return nil }
	for _, tc := range []struct {
		name string
		p    retry.Policy
		want string
	}{
		{"negative initial", retry.Policy{Initial: -2}, "Initial"},
		{"negative max delay", retry.Policy{MaxDelay: -1}, "MaxDelay"},
		{"negative elapsed", retry.Policy{MaxElapsed: -1}, "MaxElapsed"},
		{"negative attempt timeout", retry.Policy{AttemptTimeout: -1}, "AttemptTimeout"},
		{"negative attempts", retry.Policy{MaxAttempts: -2}, "MaxAttempts"},
		{"multiplier below 1", retry.Policy{Multiplier: 0.5}, "Multiplier"},
		{"NaN multiplier", retry.Policy{Multiplier: nan()}, "Multiplier"},
		{"max below initial", retry.Policy{Initial: time.Minute, MaxDelay: time.Second}, "MaxDelay"},
		{"max default below initial", retry.Policy{Initial: time.Hour}, "MaxDelay"},
		{"negative additive", retry.Policy{Jitter: retry.AdditiveJitter(-1)}, "AdditiveJitter"},
		{"fraction above 1", retry.Policy{Jitter: retry.ProportionalJitter(1.5)}, "ProportionalJitter"},
		{"negative fraction", retry.Policy{Jitter: retry.ProportionalJitter(-0.1)}, "ProportionalJitter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if err == nil || !errors.Is(err, retry.ErrInvalidPolicy) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want error naming %s", err, tc.want)
			}
			if derr := retry.Do(context.Background(), tc.p, op); derr == nil || derr.Error() != err.Error() || called {
				t.Fatalf("Do = %v, called = %v", derr, called)
			}
		})
	}
	for _, p := range []retry.Policy{{}, retry.AWSStandardPolicy(), retry.GRPCConnectPolicy(), {Initial: retry.Immediate},
		{MaxAttempts: retry.Unlimited}, {Multiplier: 1}, {Jitter: retry.AdditiveJitter(0)}, {Jitter: retry.ProportionalJitter(1)}} {
		if err := p.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", p, err)
		}
	}
}

func nan() float64 { var z float64; return z / z }

func TestValidateEveryField(t *testing.T) {
	// Every message names the field and its value.
	for _, tc := range []struct {
		p    retry.Policy
		want string
	}{
		{retry.Policy{Initial: -5 * time.Second}, "Initial -5s is negative"},
		{retry.Policy{MaxDelay: -time.Second}, "MaxDelay -1s is negative"},
		{retry.Policy{MaxElapsed: -time.Minute}, "MaxElapsed -1m0s is negative"},
		{retry.Policy{AttemptTimeout: -time.Millisecond}, "AttemptTimeout -1ms is negative"},
		{retry.Policy{MaxDelay: retry.Immediate}, "MaxDelay is retry.Immediate, which only Initial takes"},
		{retry.Policy{MaxElapsed: retry.Immediate}, "MaxElapsed is retry.Immediate, which only Initial takes"},
		{retry.Policy{AttemptTimeout: retry.Immediate}, "AttemptTimeout is retry.Immediate, which only Initial takes"},
		{retry.Policy{MaxAttempts: -3}, "MaxAttempts -3 is negative"},
		{retry.Policy{Multiplier: 0.9}, "Multiplier 0.9 is below 1"},
		{retry.Policy{Multiplier: -2}, "Multiplier -2 is below 1"},
		{retry.Policy{Multiplier: math.Inf(-1)}, "Multiplier -Inf is below 1"},
		{retry.Policy{MaxDelay: 500 * time.Millisecond}, "MaxDelay 500ms is below Initial 1s"},
		{retry.Policy{Initial: 2 * time.Second, MaxDelay: time.Second}, "MaxDelay 1s is below Initial 2s"},
		{retry.Policy{Initial: time.Minute}, "MaxDelay 32s is below Initial 1m0s"},
		{retry.Policy{Jitter: retry.AdditiveJitter(-time.Second)}, "AdditiveJitter maximum -1s is negative"},
		{retry.Policy{Jitter: retry.ProportionalJitter(nan())}, "ProportionalJitter fraction NaN is outside [0, 1]"},
		{retry.Policy{Initial: retry.Immediate, Jitter: retry.ProportionalJitter(2)}, "ProportionalJitter fraction 2"},
	} {
		err := tc.p.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), "retry: invalid policy: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Validate() = %v, want %q", tc.p, err, tc.want)
		}
	}
	// The limits themselves are valid.
	for _, p := range []retry.Policy{
		{Initial: time.Second, MaxDelay: time.Second},
		{Initial: retry.DefaultMaxDelay},
		{MaxDelay: retry.DefaultInitial},
		{Initial: 1, MaxDelay: 1},
		{Initial: math.MaxInt64, MaxDelay: math.MaxInt64, Multiplier: math.Inf(1)},
		{Initial: retry.Immediate, MaxDelay: time.Nanosecond}, // Immediate ignores MaxDelay
		{MaxElapsed: math.MaxInt64, AttemptTimeout: math.MaxInt64, MaxAttempts: math.MaxInt},
		{Jitter: retry.AdditiveJitter(math.MaxInt64)},
		{Jitter: retry.ProportionalJitter(0)},
	} {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: Validate() = %v, want nil", p, err)
		}
	}
}

func TestPresets(t *testing.T) {
	aws := retry.AWSStandardPolicy()
	if aws.MaxAttempts != 3 || aws.Jitter != retry.FullJitter() || aws.MaxDelay != 20*time.Second || aws.Initial != 50*time.Millisecond {
		t.Errorf("AWSStandardPolicy() = %+v", aws)
	}
	g := retry.GRPCConnectPolicy()
	if g.Initial != time.Second || g.Multiplier != 1.6 || g.MaxDelay != 120*time.Second || g.Jitter != retry.ProportionalJitter(0.2) {
		t.Errorf("GRPCConnectPolicy() = %+v", g)
	}
	// gRPC's waits before jitter: 1, 1.6, 2.56, ... capped at 120 s; with
	// ±20 % jitter each lies in [0.8 d, min(1.2 d, 120 s)].
	for n, want := range []time.Duration{time.Second, 1600 * time.Millisecond, 2560 * time.Millisecond} {
		lo, hi := g.Bounds(n)
		if lo != want*8/10 || hi != want*12/10 {
			t.Errorf("GRPCConnectPolicy Bounds(%d) = [%v, %v], want [%v, %v]", n, lo, hi, want*8/10, want*12/10)
		}
	}
	if lo, hi := g.Bounds(100); lo != 96*time.Second || hi != 120*time.Second {
		t.Errorf("GRPCConnectPolicy Bounds(100) = [%v, %v], want [96s, 120s]", lo, hi)
	}
	if lo, hi := aws.Bounds(2); lo != 0 || hi != 200*time.Millisecond {
		t.Errorf("AWSStandardPolicy Bounds(2) = [%v, %v], want [0, 200ms]", lo, hi)
	}
}

func TestJitterString(t *testing.T) {
	for _, tc := range []struct {
		j    retry.Jitter
		want string
	}{
		{retry.Jitter{}, "additive"},
		{retry.NoJitter(), "none"},
		{retry.FullJitter(), "full"},
		{retry.EqualJitter(), "equal"},
		{retry.DecorrelatedJitter(), "decorrelated"},
		{retry.AdditiveJitter(250 * time.Millisecond), "additive:250ms"},
		{retry.ProportionalJitter(0.2), "proportional:0.2"},
	} {
		if got := tc.j.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

// A Policy holds no per-call state: one value serves many goroutines.
func TestPolicySharedBetweenGoroutines(t *testing.T) {
	p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}
	done := make(chan int)
	for range 8 {
		go func() {
			calls := 0
			for range 100 {
				retry.Do(context.Background(), p, func(context.Context) error { calls++; return errTransient })
			}
			done <- calls
		}()
	}
	for range 8 {
		if c := <-done; c != 300 {
			t.Errorf("goroutine made %d calls, want 300", c)
		}
	}
	if errors.Is(p.Validate(), retry.ErrInvalidPolicy) {
		t.Error("policy changed")
	}
}
