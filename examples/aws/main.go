// Command aws shows retrykit as the one retry layer of the generated AWS
// SDK for Go v2 clients (service/s3, service/dynamodb), through
// retryaws, against loopback fakes of S3 and DynamoDB: no network, no
// credentials (static keys, BaseEndpoint on 127.0.0.1).
//
// Each row is one setup: what the fake answered, how many requests it
// received and applied, what retryaws told its Observer (retries, and how
// the call ended), and the error the caller got. The
// last rows run 200 UpdateItem calls, each adding 1 to a counter, through a
// fake that loses 20 % of replies after applying them, with the SDK's own
// standard retryer and with retryaws. It exits with status 1 if a row is
// not as docs/aws.md says.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/awsfake"
	"github.com/retrykit/retry/retryaws"
)

// counts is an Observer that counts retries and remembers how the last
// call ended.
type counts struct {
	retries atomic.Int64
	last    atomic.Value // string
}

func (c *counts) Observe(_ context.Context, e retry.Event) {
	switch e.Kind {
	case retry.EventRetry:
		c.retries.Add(1)
	case retry.EventDone:
		if e.Err == nil {
			c.last.Store(fmt.Sprintf("ok after %d", e.Attempt))
		} else {
			c.last.Store(fmt.Sprintf("gave up after %d: %s", e.Attempt, e.Reason))
		}
	}
}

func main() {
	failed := false
	fmt.Println("| setup | fake answers | received | applied | retryaws | caller's error |")
	fmt.Println("|---|---|---|---|---|---|")
	row := func(name, answers string, f *awsfake.Fake, op string, obs *counts, err error, wantRequests int, wantMaybe bool) {
		got := "nil"
		if err != nil {
			got = "ErrMaybeApplied: " + fmt.Sprint(errors.Is(err, retry.ErrMaybeApplied))
			if errors.Is(err, retryaws.ErrMaxAttemptsOverride) {
				got = "ErrMaxAttemptsOverride"
			}
		}
		seen := "—"
		if obs != nil {
			if l, ok := obs.last.Load().(string); ok {
				seen = fmt.Sprintf("%d retries, %s", obs.retries.Load(), l)
			}
		}
		fmt.Printf("| %s | %s | %d | %d | %s | %s |\n", name, answers, f.Requests(op), f.Applied(op), seen, got)
		if f.Requests(op) != wantRequests || (err != nil && errors.Is(err, retry.ErrMaybeApplied)) != wantMaybe {
			fmt.Fprintf(os.Stderr, "aws: %s: %d requests (want %d), error %v\n", name, f.Requests(op), wantRequests, err)
			failed = true
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := retry.Policy{Initial: 10 * time.Millisecond, Jitter: retry.FullJitter(), MaxAttempts: 4}

	// S3 GetObject: two 503 SlowDown, then the object.
	f, obs, s, _, stop := setup(p)
	f.SetObject("b/k", []byte("hello"))
	f.Script = first("GetObject", 2, awsfake.Answer{Status: 503, Code: "SlowDown"})
	err := getObject(ctx, s)
	row("S3 GetObject", "503 SlowDown ×2, then 200", f, "GetObject", obs, err, 3, false)
	stop()

	// S3 CompleteMultipartUpload: 200 with an <Error> body, which the SDK
	// rewrites as a 500: the upload may have been completed.
	f, obs, s, _, stop = setup(p)
	f.Script = first("CompleteMultipartUpload", 1, awsfake.Answer{S3Body200Error: true})
	_, err = s.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String("b"), Key: aws.String("k"), UploadId: aws.String("u1"),
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: []s3types.CompletedPart{{ETag: aws.String(`"e"`), PartNumber: aws.Int32(1)}}},
	})
	row("S3 CompleteMultipartUpload", "200 with an InternalError body", f, "CompleteMultipartUpload", obs, err, 1, true)
	stop()

	// S3 PutObject of a stream (a pipe: not an io.Seeker) whose reply was
	// lost: AddBodyCheck tells the Retryer the body cannot be sent again.
	// Over TLS, as S3 is reached, the SDK sends a stream without hashing
	// it first.
	f, obs, s, _, stop = setupWith(p, httptest.NewTLSServer)
	f.Script = first("PutObject", 1, awsfake.Answer{Drop: true})
	pr, pw := io.Pipe()
	go func() {
		_, err := io.WriteString(pw, "hello")
		pw.CloseWithError(err)
	}()
	_, err = s.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Body: pr})
	pr.Close()
	row("S3 PutObject, the body a pipe (AddBodyCheck)", "reply lost after applying, then 200", f, "PutObject", obs, err, 1, true)
	if !retry.IsExhausted(err) {
		fmt.Fprintf(os.Stderr, "aws: PutObject of a pipe: retry.IsExhausted false: %v\n", err)
		failed = true
	}
	stop()

	// DynamoDB: a read and an ADD, each losing its first reply.
	for _, tc := range []struct {
		op      string
		want    int
		wantErr bool
	}{{"GetItem", 2, false}, {"UpdateItem", 1, true}, {"TransactWriteItems", 2, false}} {
		var d *dynamodb.Client
		f, obs, _, d, stop = setup(p)
		f.Script = first(tc.op, 1, awsfake.Answer{Drop: true})
		switch tc.op {
		case "GetItem":
			_, err = d.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key})
		case "UpdateItem":
			err = add(ctx, d)
		default:
			_, err = d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddb.TransactWriteItem{{
				Put: &ddb.Put{TableName: aws.String("t"), Item: key},
			}}})
		}
		name := "DynamoDB " + tc.op
		if tc.op == "TransactWriteItems" {
			tok := f.Tokens()
			if len(tok) != 2 || tok[0] != tok[1] {
				fmt.Fprintf(os.Stderr, "aws: TransactWriteItems tokens %q, want one token sent twice\n", tok)
				failed = true
			}
			name += " (one ClientRequestToken, sent twice: the service applies it once)"
		}
		row(name, "reply lost after applying, then 200", f, tc.op, obs, err, tc.want, tc.wantErr)
		stop()
	}

	// A client whose attempt limit the SDK overrides is refused unsent.
	f, obs, _, d, stop := setup(p)
	over := dynamodb.New(d.Options(), func(o *dynamodb.Options) { o.RetryMaxAttempts = 5 })
	_, err = over.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key})
	row("DynamoDB GetItem, RetryMaxAttempts 5", "—", f, "GetItem", obs, err, 0, false)
	if !errors.Is(err, retryaws.ErrMaxAttemptsOverride) {
		failed = true
	}
	stop()

	// The counter, with the SDK's own retryer and with retryaws.
	fmt.Println()
	fmt.Println("| 200 UpdateItem ADD 1, 20 % of replies lost | requests | counter | calls that failed | of which ErrMaybeApplied |")
	fmt.Println("|---|---|---|---|---|")
	for _, sdk := range []bool{true, false} {
		f, _, _, d, stop := setup(p)
		name := "retryaws"
		if sdk {
			name = "the SDK's standard retryer"
			d = dynamodb.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: creds, BaseEndpoint: d.Options().BaseEndpoint})
		}
		f.DropRate = 0.2
		fails, maybe := 0, 0
		for range 200 {
			if err := add(ctx, d); err != nil {
				fails++
				if errors.Is(err, retry.ErrMaybeApplied) {
					maybe++
				}
			}
		}
		fmt.Printf("| %s | %d | %d | %d | %d |\n", name, f.Requests("UpdateItem"), f.Item("c"), fails, maybe)
		if !sdk && (f.Item("c") != 200 || maybe != f.Lost("UpdateItem") || fails != maybe) {
			fmt.Fprintf(os.Stderr, "aws: retryaws left the counter at %d (want 200), %d failed, %d ErrMaybeApplied, %d lost\n", f.Item("c"), fails, maybe, f.Lost("UpdateItem"))
			failed = true
		}
		if sdk && f.Item("c") <= 200 {
			fmt.Fprintf(os.Stderr, "aws: the SDK's retryer left the counter at %d, not above 200\n", f.Item("c"))
			failed = true
		}
		stop()
	}
	if failed {
		os.Exit(1)
	}
}

var (
	key   = map[string]ddb.AttributeValue{"pk": &ddb.AttributeValueMemberS{Value: "c"}}
	creds = credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example-secret", "")
)

// setup starts a fake on loopback and returns it with S3 and DynamoDB
// clients that retry through retryaws with p and an Observer (and
// retryaws.AddBodyCheck), and a function that stops the fake.
func setup(p retry.Policy) (*awsfake.Fake, *counts, *s3.Client, *dynamodb.Client, func()) {
	return setupWith(p, httptest.NewServer)
}

// setupWith is setup with the fake served by serve (httptest.NewServer or
// httptest.NewTLSServer).
func setupWith(p retry.Policy, serve func(http.Handler) *httptest.Server) (*awsfake.Fake, *counts, *s3.Client, *dynamodb.Client, func()) {
	f := awsfake.New()
	srv := serve(f)
	obs := &counts{}
	p.Observer = obs
	r, err := retryaws.New(p)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg := aws.Config{
		Region:                     "us-east-1",
		Credentials:                creds,
		BaseEndpoint:               aws.String(srv.URL),
		HTTPClient:                 srv.Client(),
		Retryer:                    func() aws.Retryer { return r },
		APIOptions:                 []func(*middleware.Stack) error{retryaws.AddBodyCheck},
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	s := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	return f, obs, s, dynamodb.NewFromConfig(cfg), srv.Close
}

// first answers the first n requests of op with a.
func first(op string, n int, a awsfake.Answer) func(string, int) awsfake.Answer {
	return func(o string, i int) awsfake.Answer {
		if o == op && i <= n {
			return a
		}
		return awsfake.Answer{}
	}
}

func getObject(ctx context.Context, s *s3.Client) error {
	out, err := s.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
	if err != nil {
		return err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err == nil && !strings.EqualFold(string(b), "hello") {
		err = fmt.Errorf("aws: GetObject read %q", b)
	}
	return err
}

// add adds 1 to attribute n of item c.
func add(ctx context.Context, d *dynamodb.Client) error {
	_, err := d.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String("t"),
		Key:                       key,
		UpdateExpression:          aws.String("ADD n :one"),
		ExpressionAttributeValues: map[string]ddb.AttributeValue{":one": &ddb.AttributeValueMemberN{Value: "1"}},
	})
	return err
}
