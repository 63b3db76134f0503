package retryaws_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/awsfake"
	"github.com/retrykit/retry/retryaws"
)

// A DynamoDB client whose every call retries through a policy: a read
// whose reply was lost is sent again, an ADD whose reply was lost is not.
func ExampleNew() {
	fake := awsfake.New() // a loopback DynamoDB that loses the first reply to each operation
	fake.Script = func(op string, n int) awsfake.Answer { return awsfake.Answer{Drop: n == 1} }
	srv := httptest.NewServer(fake)
	defer srv.Close()

	r, err := retryaws.New(retry.Policy{Initial: 10 * time.Millisecond, Jitter: retry.FullJitter(), MaxAttempts: 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	db := dynamodb.NewFromConfig(aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example-secret", ""),
		BaseEndpoint: aws.String(srv.URL),
		Retryer:      func() aws.Retryer { return r },
	})
	ctx := context.Background()
	key := map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: "c"}}

	_, err = db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key})
	fmt.Println("GetItem:", err, "after", fake.Requests("GetItem"), "requests")

	_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String("t"), Key: key, UpdateExpression: aws.String("ADD n :one"),
		ExpressionAttributeValues: map[string]ddb.AttributeValue{":one": &ddb.AttributeValueMemberN{Value: "1"}},
	})
	fmt.Println("UpdateItem may have been applied:", errors.Is(err, retry.ErrMaybeApplied), "after", fake.Requests("UpdateItem"), "request")
	fmt.Println("counter:", fake.Item("c"))
	// Output:
	// GetItem: <nil> after 2 requests
	// UpdateItem may have been applied: true after 1 request
	// counter: 1
}

// Check tells at once whether a client's calls go through a Retryer, or
// would be refused because the SDK overrides its attempt limit.
func ExampleCheck() {
	r, _ := retryaws.New(retry.Policy{})
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", Retryer: r})
	fmt.Println(retryaws.Check(db.Options().Retryer))

	overridden := dynamodb.New(dynamodb.Options{Region: "us-east-1", Retryer: r, RetryMaxAttempts: 5})
	fmt.Println(errors.Is(retryaws.Check(overridden.Options().Retryer), retryaws.ErrMaxAttemptsOverride))

	sdk := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	fmt.Println(retryaws.Check(sdk.Options().Retryer))
	// Output:
	// <nil>
	// true
	// retryaws: the client retries with another Retryer: a *retry.Standard
}

// MarkSafe lets one call repeat after a lost reply: an UpdateItem that only
// SETs fixed values leaves the same item however often it is applied.
func ExampleMarkSafe() {
	fake := awsfake.New()
	fake.Script = func(op string, n int) awsfake.Answer { return awsfake.Answer{Drop: n == 1} }
	srv := httptest.NewServer(fake)
	defer srv.Close()
	r, _ := retryaws.New(retry.Policy{Initial: time.Millisecond, MaxAttempts: 3})
	db := dynamodb.New(dynamodb.Options{
		Region: "us-east-1", Retryer: r, BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example-secret", ""),
	})
	_, err := db.UpdateItem(retryaws.MarkSafe(context.Background()), &dynamodb.UpdateItemInput{
		TableName: aws.String("t"), Key: map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: "c"}},
		UpdateExpression:          aws.String("SET colour = :c"),
		ExpressionAttributeValues: map[string]ddb.AttributeValue{":c": &ddb.AttributeValueMemberS{Value: "blue"}},
	})
	fmt.Println(err, fake.Requests("UpdateItem"))
	// Output:
	// <nil> 2
}

// Safety says which operations the Retryer repeats after a lost reply.
func ExampleSafety() {
	for _, op := range []struct{ service, name string }{
		{retryaws.ServiceDynamoDB, "GetItem"}, {retryaws.ServiceDynamoDB, "PutItem"},
		{retryaws.ServiceDynamoDB, "TransactWriteItems"}, {retryaws.ServiceDynamoDB, "UpdateItem"},
		{retryaws.ServiceS3, "PutObject"}, {retryaws.ServiceS3, "CreateMultipartUpload"},
	} {
		fmt.Printf("%s %s: %s\n", op.service, op.name, retryaws.Safety(op.service, op.name))
	}
	// Output:
	// DynamoDB GetItem: read-only
	// DynamoDB PutItem: idempotent
	// DynamoDB TransactWriteItems: idempotency token
	// DynamoDB UpdateItem: unsafe
	// S3 PutObject: idempotent
	// S3 CreateMultipartUpload: unsafe
}

// WithClass changes what the Retryer repeats after a lost reply for every
// call of an operation: here an application whose UpdateItem calls only
// SET fixed values.
func ExampleWithClass() {
	fake := awsfake.New()
	fake.Script = func(op string, n int) awsfake.Answer { return awsfake.Answer{Drop: n == 1} }
	srv := httptest.NewServer(fake)
	defer srv.Close()
	r, _ := retryaws.New(retry.Policy{Initial: time.Millisecond, MaxAttempts: 3},
		retryaws.WithClass(retryaws.ServiceDynamoDB, retryaws.Idempotent, "UpdateItem"))
	db := dynamodb.New(dynamodb.Options{
		Region: "us-east-1", Retryer: r, BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example-secret", ""),
	})
	_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String("t"), Key: map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: "c"}},
		UpdateExpression:          aws.String("SET colour = :c"),
		ExpressionAttributeValues: map[string]ddb.AttributeValue{":c": &ddb.AttributeValueMemberS{Value: "blue"}},
	})
	fmt.Println(err, fake.Requests("UpdateItem"))
	// Output:
	// <nil> 2
}

// WithMaxServerWait caps the wait a service may ask for through
// x-amz-retry-after: one that asks for more gets its error back at once.
func ExampleWithMaxServerWait() {
	fake := awsfake.New()
	fake.Script = func(op string, n int) awsfake.Answer {
		return awsfake.Answer{Status: 400, Code: "ThrottlingException", Header: map[string]string{"X-Amz-Retry-After": "60000"}}
	}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	r, _ := retryaws.New(retry.Policy{Initial: time.Millisecond, MaxAttempts: 3}, retryaws.WithMaxServerWait(time.Second))
	db := dynamodb.New(dynamodb.Options{
		Region: "us-east-1", Retryer: r, BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example-secret", ""),
	})
	_, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("t"), Key: map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: "c"}}})
	var re *retry.Error
	fmt.Println(errors.As(err, &re), re.Reason, fake.Requests("GetItem"))
	// Output:
	// true error not retryable 1
}

// AddBodyCheck lets the Retryer see an upload whose body cannot be sent
// again: a PutObject from a pipe whose reply was lost ends at once, and
// its error says it may have been applied.
func ExampleAddBodyCheck() {
	fake := awsfake.New() // a loopback S3 that loses the first reply
	fake.Script = func(op string, n int) awsfake.Answer { return awsfake.Answer{Drop: n == 1} }
	srv := httptest.NewTLSServer(fake) // over TLS the SDK sends a stream without hashing it first
	defer srv.Close()

	r, _ := retryaws.New(retry.Policy{Initial: time.Millisecond, MaxAttempts: 3})
	client := s3.NewFromConfig(aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example-secret", ""),
		BaseEndpoint: aws.String(srv.URL),
		HTTPClient:   srv.Client(),
		Retryer:      func() aws.Retryer { return r },
		APIOptions:   []func(*middleware.Stack) error{retryaws.AddBodyCheck},
	}, func(o *s3.Options) { o.UsePathStyle = true })

	pr, pw := io.Pipe()
	go func() {
		_, err := io.WriteString(pw, "hello")
		pw.CloseWithError(err)
	}()
	_, err := client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Body: pr})
	pr.Close() // ends the writer if the body was not read to the end
	fmt.Println("may have been applied:", errors.Is(err, retry.ErrMaybeApplied), "exhausted:", retry.IsExhausted(err), "requests:", fake.Requests("PutObject"))
	// Output:
	// may have been applied: true exhausted: true requests: 1
}
