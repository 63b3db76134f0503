package retryaws

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/awsfake"
)

type cancelKey struct{}

// cancelAt says when the Observer cancels a call: at its first EventRetry
// (inWait) or at its second EventAttempt.
type cancelAt struct {
	cancel context.CancelFunc
	inWait bool
}

// Many goroutines share one Retryer, their calls losing replies, meeting
// 500s and throttling, some cancelled by their Observer between the SDK's
// callbacks (in GetRetryToken, and just before the next attempt): no call
// applies an UpdateItem twice, and no call's state stays behind in the
// Retryer.
func TestSharedRetryerUnderLoad(t *testing.T) {
	f := awsfake.New()
	f.DropRate = 0.2
	f.Script = func(op string, n int) awsfake.Answer {
		switch n % 11 {
		case 3:
			return awsfake.Answer{Status: 500, Code: "InternalServerError"}
		case 7:
			return awsfake.Answer{Status: 400, Code: "ThrottlingException"}
		}
		return awsfake.Answer{}
	}
	var inWait, beforeAttempt atomic.Int32
	obs := retry.ObserverFunc(func(ctx context.Context, e retry.Event) {
		at, _ := ctx.Value(cancelKey{}).(cancelAt)
		switch {
		case at.cancel == nil:
		case at.inWait && e.Kind == retry.EventRetry && e.Attempt == 1:
			inWait.Add(1)
			at.cancel() // ends the wait GetRetryToken is about to make
		case !at.inWait && e.Kind == retry.EventAttempt && e.Attempt == 2:
			beforeAttempt.Add(1)
			at.cancel() // the SDK sees it before the next attempt
		}
	})
	r, err := New(retry.Policy{Initial: retry.Immediate, MaxAttempts: 4, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	d := dynamodb.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDFAKE", "secretfake", ""),
		HTTPClient:  awsfake.Client{F: f},
		Retryer:     func() aws.Retryer { return r },
	}, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String("http://fake.invalid") })

	const workers, calls = 16, 60
	var wg sync.WaitGroup
	ok := make([]int, workers)
	maybe := make([]int, workers)
	for w := range workers {
		wg.Go(func() {
			key := map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: "k" + strconv.Itoa(w)}}
			for i := range calls {
				ctx := context.Background()
				if i%5 >= 3 {
					c, cancel := context.WithCancel(ctx)
					defer cancel()
					ctx = context.WithValue(c, cancelKey{}, cancelAt{cancel, i%5 == 4})
				}
				_, err := d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: key, UpdateExpression: aws.String("ADD n :one"),
					ExpressionAttributeValues: map[string]ddb.AttributeValue{":one": &ddb.AttributeValueMemberN{Value: "1"}}})
				switch {
				case err == nil:
					ok[w]++
				case errors.Is(err, retry.ErrMaybeApplied):
					maybe[w]++
				}
				_, _ = d.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key})
				_, _ = d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddb.TransactWriteItem{{
					Put: &ddb.Put{TableName: aws.String("t"), Item: map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: "x" + strconv.Itoa(w)}}},
				}}})
			}
		})
	}
	wg.Wait()
	var oks, maybes int
	for w := range workers {
		oks, maybes = oks+ok[w], maybes+maybe[w]
	}
	if oks == 0 || maybes == 0 || inWait.Load() == 0 || beforeAttempt.Load() == 0 {
		t.Fatalf("%d successes, %d ErrMaybeApplied, %d calls cancelled in GetRetryToken, %d before an attempt: the run tests nothing", oks, maybes, inWait.Load(), beforeAttempt.Load())
	}
	for w := range workers {
		if n := f.Item("k" + strconv.Itoa(w)); n < int64(ok[w]) || n > int64(ok[w]+maybe[w]) {
			t.Errorf("worker %d: counter %d, want between its %d successes and those plus its %d ErrMaybeApplied", w, n, ok[w], maybe[w])
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.parked) != 0 {
		t.Fatalf("%d calls' states left in the Retryer", len(r.parked))
	}
}
