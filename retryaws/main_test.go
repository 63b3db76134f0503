package retryaws_test

import (
	"context"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/retrykit/retry/internal/awsfake"
	"github.com/retrykit/retry/retryaws"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(fleetEnv); spec != "" {
		os.Exit(fleetWorker(spec)) // a worker process of TestFleetBudgetBoundsAWSRetries
	}
	goleak.VerifyTestMain(m)
}

// start serves f on loopback until the test ends and returns its URL.
func start(t *testing.T, f *awsfake.Fake) string {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv.URL
}

// clients returns real generated S3 and DynamoDB clients that talk to url
// with static credentials and the Retryer r (nil: the SDK's own), their
// HTTP client being hc (nil: the SDK's default).
func clients(url string, r aws.Retryer, hc aws.HTTPClient) (*s3.Client, *dynamodb.Client) {
	cfg := aws.Config{
		Region:                     "us-east-1",
		Credentials:                credentials.NewStaticCredentialsProvider("AKIDFAKE", "secretfake", ""),
		BaseEndpoint:               aws.String(url),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if hc != nil {
		cfg.HTTPClient = hc
	}
	if r != nil {
		cfg.Retryer = func() aws.Retryer { return r }
	}
	s := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	d := dynamodb.NewFromConfig(cfg)
	return s, d
}

// ctxTimeout is a context that ends the test's calls if something hangs.
func ctxTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// retryerOrSDK returns r as an aws.Retryer, or nil (the SDK's own) for a
// nil r.
func retryerOrSDK(r *retryaws.Retryer) aws.Retryer {
	if r == nil {
		return nil
	}
	return r
}
