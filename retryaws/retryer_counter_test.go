package retryaws_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/awsfake"
)

const counterCalls = 1000

// counterRun makes counterCalls UpdateItem calls (ADD 1 to a counter),
// each followed by a GetItem, one after the other, through d, and returns
// the errors of each kind.
func counterRun(ctx context.Context, d *dynamodb.Client, calls int) (updateErrs, maybe, getErrs int) {
	for range calls {
		if err := opUpdateItem.call(ctx, nil, d); err != nil {
			updateErrs++
			if errors.Is(err, retry.ErrMaybeApplied) {
				maybe++
			}
		}
		if err := opGetItem.call(ctx, nil, d); err != nil {
			getErrs++
		}
	}
	return
}

// Side by side on the same fake, which applies every request and then
// loses 20 % of the replies (a seeded draw per request): the SDK's standard retryer repeats the
// UpdateItem calls whose reply was lost, and the counter ends above
// 1,000; through retryaws it ends at exactly 1,000, every call that lost
// its reply returning ErrMaybeApplied, and every GetItem succeeds. The run
// is sequential and in a synctest bubble (an in-memory transport resets
// the "connection" after applying), so the SDK's waits cost no real time
// and the figures are the same at every run.
func TestCounterSideBySide(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := awsfake.New()
		f.DropRate = 0.2
		_, d := clients("http://fake.invalid", nil, awsfake.Client{F: f})
		updErrs, _, getErrs := counterRun(context.Background(), d, counterCalls)
		t.Logf("SDK standard retryer: counter %d after %d UpdateItem calls (%d failed), %d replies lost, %d GetItem failed, %d requests",
			f.Item("c"), counterCalls, updErrs, f.Lost("UpdateItem"), getErrs, f.Total())
		if f.Item("c") <= counterCalls {
			t.Errorf("SDK: counter %d, expected above %d", f.Item("c"), counterCalls)
		}

		f = awsfake.New()
		f.DropRate = 0.2
		p := retry.Policy{Initial: 25 * time.Millisecond, Jitter: retry.FullJitter()} // 10 attempts
		_, d = clients("http://fake.invalid", newRetryer(t, p), awsfake.Client{F: f})
		updErrs, maybe, getErrs := counterRun(context.Background(), d, counterCalls)
		t.Logf("retryaws: counter %d after %d UpdateItem calls (%d returned ErrMaybeApplied), %d replies lost, %d GetItem failed, %d requests",
			f.Item("c"), counterCalls, maybe, f.Lost("UpdateItem"), getErrs, f.Total())
		checkCounter(t, f, counterCalls, updErrs, maybe, getErrs)
	})
}

func checkCounter(t *testing.T, f *awsfake.Fake, calls, updErrs, maybe, getErrs int) {
	t.Helper()
	if got := f.Item("c"); got != int64(calls) {
		t.Errorf("retryaws: counter %d, want exactly %d", got, calls)
	}
	if lost := f.Lost("UpdateItem"); maybe != lost || updErrs != maybe || lost == 0 {
		t.Errorf("retryaws: %d UpdateItem errors, %d matching ErrMaybeApplied, %d replies lost; want all three equal and above 0", updErrs, maybe, lost)
	}
	if getErrs != 0 || f.Lost("GetItem") == 0 {
		t.Errorf("retryaws: %d GetItem failed (%d replies lost), want none failed", getErrs, f.Lost("GetItem"))
	}
}

// The same with retryaws over a real loopback connection, reset (RST)
// after the fake applied the request.
func TestCounterOverTheWire(t *testing.T) {
	f := awsfake.New()
	f.DropRate = 0.2
	p := retry.Policy{Initial: time.Millisecond, Jitter: retry.FullJitter()} // 10 attempts
	_, d := clients(start(t, f), newRetryer(t, p), nil)
	ctx := ctxTimeout(t)
	updErrs, maybe, getErrs := counterRun(ctx, d, 200)
	checkCounter(t, f, 200, updErrs, maybe, getErrs)
}
