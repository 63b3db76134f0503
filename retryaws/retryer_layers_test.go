package retryaws_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/awsfake"
	"github.com/retrykit/retry/retryaws"
)

// The server sees one layer's worth of attempts whatever the user stacks:
// retryaws alone, retryaws inside a retry.Do (the call's error says the
// retries were used up, so the outer loop stops), and the SDK's retryer
// left on under a retry.Do, which Check reports and which multiplies.
func TestOneLayer(t *testing.T) {
	outer := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}
	around := func(ctx context.Context, d *dynamodb.Client) error {
		return retry.Do(ctx, outer, func(ctx context.Context) error { return opGetItem.call(ctx, nil, d) })
	}
	alone := func(ctx context.Context, d *dynamodb.Client) error { return opGetItem.call(ctx, nil, d) }
	for _, tc := range []struct {
		name     string
		sdk      bool // the SDK's own retryer instead of retryaws
		call     func(context.Context, *dynamodb.Client) error
		a        awsfake.Answer
		requests int
	}{
		{"retryaws alone, 500", false, alone, awsfake.Answer{Status: 500, Code: "InternalServerError"}, 4},
		{"retryaws in retry.Do, 500", false, around, awsfake.Answer{Status: 500, Code: "InternalServerError"}, 4},
		{"retryaws in retry.Do, ValidationException", false, around, awsfake.Answer{Status: 400, Code: "ValidationException"}, 1},
		{"retryaws in retry.Do, lost reply of a read", false, around, awsfake.Answer{Drop: true}, 4},
		{"the SDK's retryer in retry.Do, 500 (counted)", true, around, awsfake.Answer{Status: 500, Code: "InternalServerError"}, 3 * 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := awsfake.New()
				f.Script = failFirst("GetItem", 99, tc.a)
				var r *retryaws.Retryer
				if !tc.sdk {
					r = newRetryer(t, quick)
				}
				_, d := clients("http://fake.invalid", retryerOrSDK(r), awsfake.Client{F: f})
				if err := tc.call(context.Background(), d); err == nil {
					t.Fatal("the call succeeded")
				}
				if got := f.Requests("GetItem"); got != tc.requests {
					t.Errorf("the server saw %d requests, want %d", got, tc.requests)
				}
				err := retryaws.Check(d.Options().Retryer)
				if tc.sdk != errors.Is(err, retryaws.ErrOtherRetryer) {
					t.Errorf("Check = %v", err)
				}
			})
		})
	}
}

// One call of a client that keeps the SDK's retryer can retry through
// retryaws instead, with the call's options.
func TestPerOperation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := awsfake.New()
		f.Script = failFirst("GetItem", 99, awsfake.Answer{Status: 500, Code: "InternalServerError"})
		_, d := clients("http://fake.invalid", nil, awsfake.Client{F: f})
		r := newRetryer(t, retry.Policy{Initial: retry.Immediate, MaxAttempts: 2})
		_, err := d.GetItem(context.Background(), getItemInput(), func(o *dynamodb.Options) { o.Retryer = r })
		if !retry.IsExhausted(err) || f.Requests("GetItem") != 2 {
			t.Fatalf("%d requests (err %v), want the policy's 2, not the SDK's 4", f.Requests("GetItem"), err)
		}
		f.ResetCounts()
		_, _ = d.GetItem(context.Background(), getItemInput())
		if f.Requests("GetItem") != 4 {
			t.Fatalf("without the option: %d requests, want the SDK's 4", f.Requests("GetItem"))
		}
	})
}
