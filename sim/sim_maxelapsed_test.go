package sim_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sim"
)

// doc.go: a client "gives up by the Policy's MaxAttempts and MaxElapsed
// exactly as retry.Do does".
func TestSimMaxElapsedBoundaryAsDo(t *testing.T) {
	p := retry.Policy{Initial: time.Second, Multiplier: 2, Jitter: retry.NoJitter(), MaxAttempts: 10, MaxElapsed: 3 * time.Second}
	var doCalls int
	synctest.Test(t, func(t *testing.T) {
		retry.Do(t.Context(), p, func(context.Context) error { doCalls++; return errors.New("x") })
	})
	r, err := sim.Run(context.Background(), sim.Scenario{Clients: 1, Outage: time.Hour, Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	if int(r.Requests) != doCalls {
		t.Fatalf("sim made %v requests, retry.Do %d calls", r.Requests, doCalls)
	}
}
