package retryaws_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/awsfake"
	"github.com/retrykit/retry/retryaws"
)

// A successful GetItem through the generated client and an in-memory
// transport, with the SDK's standard retryer and with retryaws: what the
// Retryer (and AddBodyCheck) add to a call that succeeds at once.
//
//	go test -run '^$' -bench GetItem -benchmem -count 6 . | benchstat
func BenchmarkGetItem(b *testing.B) {
	for _, name := range []string{"sdk", "retryaws", "retryaws+AddBodyCheck"} {
		b.Run(name, func(b *testing.B) {
			f := awsfake.New()
			var r aws.Retryer
			if name != "sdk" {
				rr, err := retryaws.New(retry.Policy{})
				if err != nil {
					b.Fatal(err)
				}
				r = rr
			}
			_, d := clients("http://fake.invalid", r, awsfake.Client{F: f})
			if name == "retryaws+AddBodyCheck" {
				d = dynamodb.New(d.Options(), func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, retryaws.AddBodyCheck) })
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := opGetItem.call(ctx, nil, d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
