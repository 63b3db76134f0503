package retryaws_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/awsfake"
	"github.com/retrykit/retry/retryaws"
)

// An operation called through the generated clients.
type operation struct {
	name string // as the fake counts it
	call func(ctx context.Context, s *s3.Client, d *dynamodb.Client) error
}

var (
	opGetObject = operation{"GetObject", func(ctx context.Context, s *s3.Client, _ *dynamodb.Client) error {
		out, err := s.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
		if err == nil {
			_, err = io.Copy(io.Discard, out.Body)
			out.Body.Close()
		}
		return err
	}}
	opCopyObject = operation{"CopyObject", func(ctx context.Context, s *s3.Client, _ *dynamodb.Client) error {
		_, err := s.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("b"), Key: aws.String("k2"), CopySource: aws.String("b/k")})
		return err
	}}
	opComplete = operation{"CompleteMultipartUpload", func(ctx context.Context, s *s3.Client, _ *dynamodb.Client) error {
		_, err := s.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket: aws.String("b"), Key: aws.String("k"), UploadId: aws.String("u1"),
			MultipartUpload: &s3types.CompletedMultipartUpload{Parts: []s3types.CompletedPart{{ETag: aws.String(`"e"`), PartNumber: aws.Int32(1)}}},
		})
		return err
	}}
	opPutObject = operation{"PutObject", func(ctx context.Context, s *s3.Client, _ *dynamodb.Client) error {
		_, err := s.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Body: strings.NewReader("hello")})
		return err
	}}
	opUpdateItem = operation{"UpdateItem", func(ctx context.Context, _ *s3.Client, d *dynamodb.Client) error {
		_, err := d.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String("t"),
			Key:                       map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: "c"}},
			UpdateExpression:          aws.String("ADD n :one"),
			ExpressionAttributeValues: map[string]ddb.AttributeValue{":one": &ddb.AttributeValueMemberN{Value: "1"}},
		})
		return err
	}}
	opGetItem = operation{"GetItem", func(ctx context.Context, _ *s3.Client, d *dynamodb.Client) error {
		_, err := d.GetItem(ctx, getItemInput())
		return err
	}}
	opPutItem = operation{"PutItem", func(ctx context.Context, _ *s3.Client, d *dynamodb.Client) error {
		_, err := d.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: "c"}}})
		return err
	}}
	opTransact = operation{"TransactWriteItems", func(ctx context.Context, _ *s3.Client, d *dynamodb.Client) error {
		_, err := d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddb.TransactWriteItem{{
			Put: &ddb.Put{TableName: aws.String("t"), Item: map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: "c"}}},
		}}})
		return err
	}}
)

// quick is a policy with no waits, for the tests that look at attempts.
var quick = retry.Policy{Initial: retry.Immediate, MaxAttempts: 4}

func newRetryer(t *testing.T, p retry.Policy, opts ...retryaws.Option) *retryaws.Retryer {
	t.Helper()
	r, err := retryaws.New(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// failFirst answers the first n requests of op with a, the others normally.
func failFirst(op string, n int, a awsfake.Answer) func(string, int) awsfake.Answer {
	return func(o string, i int) awsfake.Answer {
		if o == op && i <= n {
			return a
		}
		return awsfake.Answer{}
	}
}

func TestClassification(t *testing.T) {
	throttle := func(code string) awsfake.Answer { return awsfake.Answer{Status: 400, Code: code} }
	for _, tc := range []struct {
		name     string
		op       operation
		a        awsfake.Answer
		fails    int  // requests answered with a, then normal answers
		requests int  // what the server must see
		ok       bool // the call succeeds
		maybe    bool // its error matches ErrMaybeApplied
	}{
		{"S3 SlowDown 503", opGetObject, awsfake.Answer{Status: 503, Code: "SlowDown"}, 2, 3, true, false},
		{"S3 SlowDown 503 on an unsafe write", opComplete, awsfake.Answer{Status: 503, Code: "SlowDown"}, 2, 3, true, false},
		{"DynamoDB ThrottlingException", opUpdateItem, throttle("ThrottlingException"), 2, 3, true, false},
		{"DynamoDB ProvisionedThroughputExceededException", opUpdateItem, throttle("ProvisionedThroughputExceededException"), 3, 4, true, false},
		{"throttled at every attempt", opUpdateItem, throttle("ProvisionedThroughputExceededException"), 9, 4, false, false},
		{"InternalServerError on a read", opGetItem, awsfake.Answer{Status: 500, Code: "InternalServerError"}, 1, 2, true, false},
		{"InternalServerError on UpdateItem", opUpdateItem, awsfake.Answer{Status: 500, Code: "InternalServerError"}, 1, 1, false, true},
		{"InternalServerError on PutItem (idempotent)", opPutItem, awsfake.Answer{Status: 500, Code: "InternalServerError"}, 1, 2, true, false},
		{"S3 200 with an error body on CopyObject (idempotent)", opCopyObject, awsfake.Answer{S3Body200Error: true}, 1, 2, true, false},
		{"S3 200 with an error body on CompleteMultipartUpload", opComplete, awsfake.Answer{S3Body200Error: true}, 1, 1, false, true},
		{"reset after the request was read, GetItem", opGetItem, awsfake.Answer{Drop: true}, 2, 3, true, false},
		{"reset after the request was read, UpdateItem", opUpdateItem, awsfake.Answer{Drop: true}, 1, 1, false, true},
		{"reset after the request was read, PutObject (idempotent)", opPutObject, awsfake.Answer{Drop: true}, 1, 2, true, false},
		{"reset after the request was read, TransactWriteItems (token)", opTransact, awsfake.Answer{Drop: true}, 1, 2, true, false},
		{"reset while the 200's body is read, UpdateItem", opUpdateItem, awsfake.Answer{Truncate: true}, 1, 1, false, true},
		{"reset while the 200's body is read, GetItem", opGetItem, awsfake.Answer{Truncate: true}, 1, 2, true, false},
		{"reset while the 200's body is read, CompleteMultipartUpload", opComplete, awsfake.Answer{Truncate: true}, 1, 1, false, true},
		{"AccessDenied", opGetObject, awsfake.Answer{Status: 403, Code: "AccessDenied"}, 9, 1, false, false},
		{"ValidationException", opGetItem, throttle("ValidationException"), 9, 1, false, false},
		{"ConditionalCheckFailedException", opUpdateItem, throttle("ConditionalCheckFailedException"), 9, 1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := awsfake.New()
			f.SetObject("b/k", []byte("hello"))
			f.Script = failFirst(tc.op.name, tc.fails, tc.a)
			s, d := clients(start(t, f), newRetryer(t, quick), nil)
			err := tc.op.call(ctxTimeout(t), s, d)
			if got := f.Requests(tc.op.name); got != tc.requests {
				t.Errorf("the server saw %d requests, want %d (err: %v)", got, tc.requests, err)
			}
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want success %v", err, tc.ok)
			}
			if err == nil {
				return
			}
			if got := errors.Is(err, retry.ErrMaybeApplied); got != tc.maybe {
				t.Errorf("errors.Is(err, ErrMaybeApplied) = %v, want %v: %v", got, tc.maybe, err)
			}
			if !retry.IsExhausted(err) {
				t.Errorf("retry.IsExhausted(err) = false: an enclosing retry loop would repeat the call: %v", err)
			}
			var re *retry.Error
			if !errors.As(err, &re) || re.Attempts != tc.requests {
				t.Errorf("errors.As(*retry.Error) = %v; attempts %v, want %d", re != nil, re, tc.requests)
			}
		})
	}
}

// The SDK fills a TransactWriteItems' ClientRequestToken once, before its
// retry loop: the repeat after a lost reply sends the same token.
func TestTokenIsReused(t *testing.T) {
	f := awsfake.New()
	f.Script = failFirst("TransactWriteItems", 1, awsfake.Answer{Drop: true})
	s, d := clients(start(t, f), newRetryer(t, quick), nil)
	if err := opTransact.call(ctxTimeout(t), s, d); err != nil {
		t.Fatal(err)
	}
	if tok := f.Tokens(); len(tok) != 2 || tok[0] == "" || tok[0] != tok[1] {
		t.Fatalf("tokens %q, want the same non-empty token twice", f.Tokens())
	}
}

// A clock-skew refusal (a Date header far from the client's clock) is
// retried: the SDK corrects its clock, and the retry is signed again.
func TestClockSkew(t *testing.T) {
	f := awsfake.New()
	f.SkewAt = time.Now().Add(time.Hour)
	f.Script = failFirst("GetItem", 1, awsfake.Answer{Status: 400, Code: "InvalidSignatureException"})
	s, d := clients(start(t, f), newRetryer(t, quick), nil)
	if err := opGetItem.call(ctxTimeout(t), s, d); err != nil {
		t.Fatal(err)
	}
	if got := f.Requests("GetItem"); got != 2 {
		t.Fatalf("requests %d, want 2", got)
	}
}

func TestMarkSafeAndWithClass(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func(context.Context) context.Context
		opts []retryaws.Option
	}{
		{"MarkSafe", retryaws.MarkSafe, nil},
		{"WithClass", func(c context.Context) context.Context { return c }, []retryaws.Option{retryaws.WithClass(retryaws.ServiceDynamoDB, retryaws.Idempotent, "UpdateItem")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := awsfake.New()
			f.Script = failFirst("UpdateItem", 1, awsfake.Answer{Drop: true})
			s, d := clients(start(t, f), newRetryer(t, quick, tc.opts...), nil)
			if err := opUpdateItem.call(tc.ctx(ctxTimeout(t)), s, d); err != nil {
				t.Fatal(err)
			}
			if got := f.Item("c"); got != 2 {
				t.Fatalf("counter %d, want 2 (applied twice, as the caller allowed)", got)
			}
		})
	}
}

func getItemInput() *dynamodb.GetItemInput {
	return &dynamodb.GetItemInput{TableName: aws.String("t"), Key: map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: "c"}}}
}

// A context that ends while the reply is awaited ends the call: a write
// may have been applied (the fake did apply it), a read was not.
func TestContextEndsWhileWaitingForTheReply(t *testing.T) {
	for _, tc := range []struct {
		op    operation
		maybe bool
	}{{opUpdateItem, true}, {opGetItem, false}} {
		t.Run(tc.op.name, func(t *testing.T) {
			f := awsfake.New()
			f.Script = failFirst(tc.op.name, 1, awsfake.Answer{Hold: true})
			s, d := clients(start(t, f), newRetryer(t, quick), nil)
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			err := tc.op.call(ctx, s, d)
			var re *retry.Error
			if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &re) || re.Reason != retry.ReasonContext {
				t.Fatalf("err = %v, want ReasonContext matching context.DeadlineExceeded", err)
			}
			if got := errors.Is(err, retry.ErrMaybeApplied); got != tc.maybe || f.Requests(tc.op.name) != 1 {
				t.Fatalf("ErrMaybeApplied %v (want %v) after %d requests (want 1): %v", got, tc.maybe, f.Requests(tc.op.name), err)
			}
		})
	}
}

// The zero Retryer is New(retry.Policy{}).
func TestZeroRetryer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := awsfake.New()
		f.Script = failFirst("GetItem", 1, awsfake.Answer{Status: 400, Code: "ThrottlingException", Header: map[string]string{"X-Amz-Retry-After": "10"}})
		_, d := clients("http://fake.invalid", &retryaws.Retryer{}, awsfake.Client{F: f})
		start := time.Now()
		if err := opGetItem.call(context.Background(), nil, d); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < time.Second || took > 2*time.Second || f.Requests("GetItem") != 2 {
			t.Fatalf("%d requests in %v, want 2 after the reference wait of 1 s to 2 s", f.Requests("GetItem"), took)
		}
		f.Script = failFirst("GetItem", 99, awsfake.Answer{Status: 500, Code: "InternalServerError"})
		f.ResetCounts()
		if err := opGetItem.call(context.Background(), nil, d); err == nil || f.Requests("GetItem") != 10 {
			t.Fatalf("%d requests, want the default 10 (err %v)", f.Requests("GetItem"), err)
		}
	})
}
