package retrygax_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/googleapis/gax-go/v2"
	"github.com/retrykit/retry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestGaxMaxElapsedBoundaryAsDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := retry.Policy{Initial: time.Second, Multiplier: 2, Jitter: retry.NoJitter(), MaxAttempts: 10, MaxElapsed: 3 * time.Second}
		var s gax.CallSettings
		mustPolicy(p).Resolve(&s)
		r := s.Retry()
		err := status.Error(codes.Unavailable, "x")
		calls := 1
		for {
			d, ok := r.Retry(err)
			if !ok {
				break
			}
			time.Sleep(d)
			calls++
		}
		if calls != 2 {
			t.Fatalf("retrygax made %d calls; retry.Do makes 2 (a wait ending at MaxElapsed gives up)", calls)
		}
	})
}
