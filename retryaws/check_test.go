package retryaws_test

import (
	"errors"
	"testing"
	"time"

	awsretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/retrykit/retry/retryaws"
)

func TestCheck(t *testing.T) {
	_, d := clients("http://fake.invalid", newRetryer(t, quick), nil)
	if err := retryaws.Check(d.Options().Retryer); err != nil {
		t.Fatalf("Check of a client with a Retryer: %v", err)
	}
	over := dynamodb.New(d.Options(), func(o *dynamodb.Options) { o.RetryMaxAttempts = 5 })
	if err := retryaws.Check(over.Options().Retryer); !errors.Is(err, retryaws.ErrMaxAttemptsOverride) {
		t.Fatalf("Check of an overridden Retryer = %v", err)
	}
	if err := retryaws.Check(nil); !errors.Is(err, retryaws.ErrOtherRetryer) {
		t.Fatalf("Check(nil) = %v", err)
	}
	if err := retryaws.Check(awsretry.AddWithMaxBackoffDelay(d.Options().Retryer, time.Second)); err == nil || errors.Is(err, retryaws.ErrOtherRetryer) {
		t.Fatalf("Check(AddWithMaxBackoffDelay(r)) = %v", err)
	}
	if err := retryaws.Check(awsretry.AddWithErrorCodes(d.Options().Retryer, "Custom")); err != nil {
		t.Fatalf("Check(AddWithErrorCodes(r)) = %v", err)
	}
}
