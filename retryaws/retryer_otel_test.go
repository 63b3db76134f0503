package retryaws_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/awsfake"
	"github.com/retrykit/retry/retryotel"
	"github.com/retrykit/retry/retrytest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The Observer's events and retryotel's metrics count exactly the
// requests the fake received: every attempt, first or retry, of every
// call, through calls that succeed, retry, lose replies and give up, five
// at a time through one Retryer.
func TestObserverAndOtelEqualServerCounts(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	var rec retrytest.Recorder
	p := retryotel.Instrument(retry.Policy{Initial: time.Millisecond, Jitter: retry.FullJitter(), MaxAttempts: 3, Observer: &rec},
		"aws", retryotel.WithMeterProvider(mp))

	f := awsfake.New()
	f.DropRate = 0.25
	f.Script = func(op string, n int) awsfake.Answer {
		switch {
		case n%7 == 0:
			return awsfake.Answer{Status: 400, Code: "ProvisionedThroughputExceededException"}
		case n%11 == 0:
			return awsfake.Answer{Status: 500, Code: "InternalServerError"}
		case n%13 == 0:
			return awsfake.Answer{Status: 400, Code: "ValidationException"}
		}
		return awsfake.Answer{}
	}
	s, d := clients(start(t, f), newRetryer(t, p), nil)
	ctx := ctxTimeout(t)
	const calls, workers = 150, 5 // concurrent calls through one Retryer
	var failures atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < calls; i += workers {
				op := []operation{opGetItem, opUpdateItem, opPutItem}[i%3]
				if op.call(ctx, s, d) != nil {
					failures.Add(1)
				}
			}
		})
	}
	wg.Wait()
	failed := int(failures.Load())

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var sum, n uint64
	var gaveUp int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case "retry.call.attempts":
				for _, dp := range m.Data.(metricdata.Histogram[int64]).DataPoints {
					sum += uint64(dp.Sum)
					n += dp.Count
				}
			case "retry.call.gave_up":
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					gaveUp += dp.Value
				}
			}
		}
	}
	total := f.Total()
	attempts, done := rec.Count(retry.EventAttempt), rec.Count(retry.EventDone)
	t.Logf("%d calls (%d failed): the fake received %d requests; retry.call.attempts sum %d over %d calls; %d EventAttempt", calls, failed, total, sum, n, attempts)
	if int(sum) != total || attempts != total {
		t.Errorf("retry.call.attempts sum %d, EventAttempt %d; the fake received %d requests", sum, attempts, total)
	}
	if n != calls || done != calls || int(gaveUp) != failed || failed == 0 {
		t.Errorf("%d calls recorded, %d EventDone, %d gave up; want %d, %d and %d (> 0)", n, done, gaveUp, calls, calls, failed)
	}
}
