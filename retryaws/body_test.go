package retryaws_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithymiddle "github.com/aws/smithy-go/middleware"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/awsfake"
	"github.com/retrykit/retry/retryaws"
)

// startTLS serves f over TLS on loopback until the test ends and returns
// its URL and a client that trusts it. Over TLS the S3 client signs an
// upload without hashing its body, so that a body that is not an io.Seeker
// is sent at all (over plain HTTP the SDK refuses it before sending).
func startTLS(t *testing.T, f *awsfake.Fake) (string, aws.HTTPClient) {
	t.Helper()
	srv := httptest.NewTLSServer(f)
	t.Cleanup(srv.Close)
	return srv.URL, srv.Client()
}

// putStream is S3 PutObject with a body that is an io.Reader and not an
// io.Seeker, as a pipe is; optFns are the call's options.
func putStream(ctx context.Context, s *s3.Client, optFns ...func(*s3.Options)) error {
	body := struct{ io.Reader }{strings.NewReader("hello")}
	_, err := s.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Body: body}, optFns...)
	return err
}

var withBodyCheck = s3.WithAPIOptions(retryaws.AddBodyCheck)

func TestAddBodyCheck(t *testing.T) {
	for _, tc := range []struct {
		name     string
		a        awsfake.Answer
		check    bool   // AddBodyCheck is installed
		seekable bool   // the body is a strings.Reader
		requests int    // what the server must see
		ok       bool   // the call succeeds
		maybe    bool   // its error matches ErrMaybeApplied
		msg      string // its error contains this
	}{
		{"reply lost", awsfake.Answer{Drop: true}, true, false, 1, false, true, "the request may have been applied, and its body cannot be sent again"},
		{"503 SlowDown", awsfake.Answer{Status: 503, Code: "SlowDown"}, true, false, 1, false, false, "the request body cannot be sent again"},
		{"AccessDenied", awsfake.Answer{Status: 403, Code: "AccessDenied"}, true, false, 1, false, false, "error not retryable"},
		{"reply lost, a seekable body", awsfake.Answer{Drop: true}, true, true, 2, true, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := awsfake.New()
			f.Script = failFirst("PutObject", 1, tc.a)
			url, hc := startTLS(t, f)
			rec := &recorder{}
			s, _ := clients(url, newRetryer(t, retry.Policy{Initial: retry.Immediate, MaxAttempts: 4, Observer: rec}), hc)
			var err error
			if tc.seekable {
				err = opPutObject.call(ctxTimeout(t), s, nil)
			} else {
				err = putStream(ctxTimeout(t), s, withBodyCheck)
			}
			if got := f.Requests("PutObject"); got != tc.requests {
				t.Errorf("the server saw %d requests, want %d (err: %v)", got, tc.requests, err)
			}
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want success %v", err, tc.ok)
			}
			if tc.ok {
				return
			}
			if got := errors.Is(err, retry.ErrMaybeApplied); got != tc.maybe {
				t.Errorf("errors.Is(err, ErrMaybeApplied) = %v, want %v: %v", got, tc.maybe, err)
			}
			if !retry.IsExhausted(err) {
				t.Errorf("retry.IsExhausted(err) = false: %v", err)
			}
			var re *retry.Error
			if !errors.As(err, &re) || re.Reason != retry.ReasonPermanent || re.Attempts != 1 {
				t.Errorf("err = %v, want a *retry.Error of 1 attempt, ReasonPermanent", err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %q, want it to say %q", err, tc.msg)
			}
			want := fmt.Sprintf("attempt 1, done 1 waited=0s reason=%d", retry.ReasonPermanent)
			if got := rec.String(); got != want {
				t.Errorf("events\n got %s\nwant %s", got, want)
			}
		})
	}
}

// Without AddBodyCheck the Retryer cannot see the body: the SDK fails the
// retry it granted with its own error, which says nothing of the lost
// reply (the limitation docs/aws.md describes).
func TestWithoutBodyCheck(t *testing.T) {
	f := awsfake.New()
	f.Script = failFirst("PutObject", 1, awsfake.Answer{Drop: true})
	url, hc := startTLS(t, f)
	s, _ := clients(url, newRetryer(t, quick), hc)
	err := putStream(ctxTimeout(t), s)
	if got := f.Requests("PutObject"); got != 1 {
		t.Errorf("the server saw %d requests, want 1", got)
	}
	if err == nil || !strings.Contains(err.Error(), "failed to rewind transport stream") {
		t.Fatalf("err = %v, want the SDK's rewind error", err)
	}
	if errors.Is(err, retry.ErrMaybeApplied) || retry.IsExhausted(err) {
		t.Errorf("err = %v matches ErrMaybeApplied or IsExhausted: update docs/aws.md", err)
	}
}

// A retry.Do around a PutObject of a stream whose reply was lost sends it
// once: the body is made afresh for each call, as a caller's would be.
func TestBodyCheckUnderDo(t *testing.T) {
	f := awsfake.New()
	f.Script = func(op string, n int) awsfake.Answer { return awsfake.Answer{Drop: true} }
	url, hc := startTLS(t, f)
	s, _ := clients(url, newRetryer(t, quick), hc)
	calls := 0
	err := retry.Do(ctxTimeout(t), retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}, func(ctx context.Context) error {
		calls++
		return putStream(ctx, s, withBodyCheck)
	})
	if calls != 1 || f.Requests("PutObject") != 1 || f.Applied("PutObject") != 1 {
		t.Errorf("retry.Do made %d calls, the server saw %d requests and applied %d; want 1 each", calls, f.Requests("PutObject"), f.Applied("PutObject"))
	}
	if !errors.Is(err, retry.ErrMaybeApplied) {
		t.Errorf("err = %v, want it to match ErrMaybeApplied", err)
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 1 || !retry.IsExhausted(re.Err) {
		t.Errorf("err = %v, want retry.Do's *retry.Error of 1 attempt around the Retryer's exhausted error", err)
	}
}

// A stack without the SDK's retry middleware (a presign client's) is left
// as it is; one with it gets the check just before it.
func TestAddBodyCheckStacks(t *testing.T) {
	s, _ := clients("https://fake.invalid", newRetryer(t, quick), nil)
	ps := s3.NewPresignClient(s, func(o *s3.PresignOptions) {
		o.ClientOptions = append(o.ClientOptions, withBodyCheck)
	})
	req, err := ps.PresignPutObject(ctxTimeout(t), &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
	if err != nil || req.Method != "PUT" {
		t.Fatalf("PresignPutObject with AddBodyCheck: %v, %+v", err, req)
	}

	st := smithymiddle.NewStack("op", nil)
	if err := retryaws.AddBodyCheck(st); err != nil || len(st.Finalize.List()) != 0 {
		t.Errorf("AddBodyCheck on a stack without Retry: %v, %v", err, st.Finalize.List())
	}
	retryMW := smithymiddle.FinalizeMiddlewareFunc("Retry", func(ctx context.Context, in smithymiddle.FinalizeInput, next smithymiddle.FinalizeHandler) (smithymiddle.FinalizeOutput, smithymiddle.Metadata, error) {
		return next.HandleFinalize(ctx, in)
	})
	if err := st.Finalize.Add(retryMW, smithymiddle.After); err != nil {
		t.Fatal(err)
	}
	if err := retryaws.AddBodyCheck(st); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(st.Finalize.List(), " "); got != "retryaws.BodyCheck Retry" {
		t.Errorf("Finalize = %s, want the check just before Retry", got)
	}
	if err := retryaws.AddBodyCheck(st); err != nil || len(st.Finalize.List()) != 2 {
		t.Errorf("AddBodyCheck a second time: %v, %v", err, st.Finalize.List())
	}
}

// Installed for the client and again for the call, the check still works.
func TestAddBodyCheckTwice(t *testing.T) {
	f := awsfake.New()
	f.Script = failFirst("PutObject", 1, awsfake.Answer{Drop: true})
	url, hc := startTLS(t, f)
	s, _ := clients(url, newRetryer(t, quick), hc)
	s = s3.New(s.Options(), withBodyCheck)
	err := putStream(ctxTimeout(t), s, withBodyCheck)
	if !errors.Is(err, retry.ErrMaybeApplied) || !retry.IsExhausted(err) || f.Requests("PutObject") != 1 {
		t.Errorf("err = %v after %d requests, want ErrMaybeApplied and IsExhausted after 1", err, f.Requests("PutObject"))
	}
}
