package main

import (
	"testing"
	"time"
)

// A build without the tests' link-time override keeps the documented grace
// period of 2 s (this package's test binary is such a build).
func TestKillGraceDefault(t *testing.T) {
	if killGraceOverride != "" || killGrace != 2*time.Second {
		t.Errorf("killGrace %v (override %q); want 2s without an override", killGrace, killGraceOverride)
	}
}
