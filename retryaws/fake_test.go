package retryaws_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/retrykit/retry/retryaws"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// answer is what the fake does with one request. The zero answer applies
// the request and answers it.
type answer struct {
	status int               // an error status (with code)
	code   string            // the error's code (S3 <Code>, DynamoDB __type)
	header map[string]string // extra response headers
	// s3Body200Error: answer 200 with an S3 <Error> body (as S3 does for
	// CopyObject and CompleteMultipartUpload), after applying the request.
	s3Body200Error bool
	drop           bool // apply the request, then reset the connection: the reply is lost
}

// fake speaks enough of the S3 REST (path-style) and DynamoDB JSON 1.0
// protocols for the tests: GetObject, PutObject, CopyObject,
// CompleteMultipartUpload, ListObjectsV2; GetItem, PutItem, UpdateItem
// (an ADD of 1 to attribute n), DeleteItem, TransactWriteItems. script, if
// set, chooses the answer to the n-th request (1-based) for an operation;
// it may be changed only while no request is in flight.
type fake struct {
	script func(op string, n int) answer
	// dropRate, when set, is the share of requests (over all operations)
	// whose reply is lost after the fake applied them, drawn from a
	// generator seeded with 1 in the order the requests arrive.
	dropRate float64
	drops    *rand.Rand

	mu      sync.Mutex
	count   map[string]int   // requests received per operation
	applied map[string]int   // requests applied per operation
	dropped map[string]int   // replies lost per operation
	items   map[string]int64 // DynamoDB attribute n per key pk
	objects map[string][]byte
	tokens  []string // ClientRequestToken of each TransactWriteItems request
	seq     int      // requests received
	skewAt  time.Time
}

func newFake() *fake {
	return &fake{count: map[string]int{}, applied: map[string]int{}, dropped: map[string]int{}, items: map[string]int64{}, objects: map[string][]byte{}}
}

// requests returns how many requests for op the fake received.
func (f *fake) requests(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count[op]
}

func (f *fake) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.count {
		n += c
	}
	return n
}

// lost returns how many replies to op were dropped after applying it.
func (f *fake) lost(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped[op]
}

func (f *fake) item(pk string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.items[pk]
}

// serve handles one request: it returns the status, headers and body of
// the reply, and drop when the connection must be reset instead.
func (f *fake) serve(r *http.Request) (status int, h http.Header, body []byte, drop bool) {
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
	}
	op := s3Operation(r)
	dynamo := false
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		op, dynamo = strings.TrimPrefix(t, "DynamoDB_20120810."), true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count[op]++
	var a answer
	if f.script != nil {
		a = f.script(op, f.count[op])
	}
	f.seq++
	if f.dropRate > 0 {
		if f.drops == nil {
			f.drops = rand.New(rand.NewPCG(1, 1))
		}
		if f.drops.Float64() < f.dropRate {
			a.drop = true
		}
	}
	h = http.Header{}
	for k, v := range a.header {
		h.Set(k, v)
	}
	if a.status != 0 {
		if dynamo {
			h.Set("Content-Type", "application/x-amz-json-1.0")
			b, _ := json.Marshal(map[string]string{"__type": "com.amazonaws.dynamodb.v20120810#" + a.code, "message": "fake " + a.code})
			return a.status, h, b, false
		}
		h.Set("Content-Type", "application/xml")
		return a.status, h, s3Error(a.code), false
	}
	f.applied[op]++
	if dynamo {
		status, body = f.dynamo(op, body)
		h.Set("Content-Type", "application/x-amz-json-1.0")
	} else {
		status, body = f.s3(op, r, body, h)
	}
	if a.s3Body200Error {
		body = s3Error("InternalError")
	}
	if a.drop {
		f.dropped[op]++
	}
	return status, h, body, a.drop
}

func s3Error(code string) []byte {
	return []byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>fake ` + code + `</Message><RequestId>fake</RequestId></Error>`)
}

func s3Operation(r *http.Request) string {
	q := r.URL.Query()
	keyed := strings.Count(strings.Trim(r.URL.Path, "/"), "/") >= 1
	switch {
	case r.Method == http.MethodGet && !keyed:
		return "ListObjectsV2"
	case r.Method == http.MethodGet:
		return "GetObject"
	case r.Method == http.MethodHead:
		return "HeadObject"
	case r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != "":
		return "CopyObject"
	case r.Method == http.MethodPut:
		return "PutObject"
	case r.Method == http.MethodPost && q.Has("uploadId"):
		return "CompleteMultipartUpload"
	case r.Method == http.MethodPost && q.Has("uploads"):
		return "CreateMultipartUpload"
	}
	return r.Method + " " + r.URL.Path
}

// s3 applies an S3 request; the caller holds f.mu.
func (f *fake) s3(op string, r *http.Request, body []byte, h http.Header) (int, []byte) {
	path := strings.TrimPrefix(r.URL.Path, "/")
	bucket, _, _ := strings.Cut(path, "/")
	switch op {
	case "GetObject":
		b, ok := f.objects[path]
		if !ok {
			h.Set("Content-Type", "application/xml")
			return 404, s3Error("NoSuchKey")
		}
		h.Set("Content-Length", strconv.Itoa(len(b)))
		return 200, b
	case "PutObject":
		f.objects[path] = body
		h.Set("ETag", `"fake"`)
		return 200, nil
	case "CopyObject":
		src := strings.TrimPrefix(r.Header.Get("X-Amz-Copy-Source"), "/")
		f.objects[path] = f.objects[src]
		return 200, []byte(`<CopyObjectResult><ETag>"fake"</ETag><LastModified>2026-12-01T00:00:00.000Z</LastModified></CopyObjectResult>`)
	case "CompleteMultipartUpload":
		return 200, []byte(`<CompleteMultipartUploadResult><Bucket>` + bucket + `</Bucket><Key>k</Key><ETag>"fake"</ETag></CompleteMultipartUploadResult>`)
	case "CreateMultipartUpload":
		return 200, []byte(`<InitiateMultipartUploadResult><Bucket>` + bucket + `</Bucket><Key>k</Key><UploadId>u1</UploadId></InitiateMultipartUploadResult>`)
	case "ListObjectsV2":
		return 200, []byte(`<ListBucketResult><Name>` + bucket + `</Name><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated></ListBucketResult>`)
	}
	return 400, s3Error("NotImplemented")
}

// dynamo applies a DynamoDB request; the caller holds f.mu.
func (f *fake) dynamo(op string, body []byte) (int, []byte) {
	var in struct {
		Key                map[string]map[string]string
		Item               map[string]map[string]string
		ClientRequestToken string
	}
	_ = json.Unmarshal(body, &in)
	pk := in.Key["pk"]["S"]
	switch op {
	case "GetItem":
		return 200, []byte(`{"Item":{"pk":{"S":` + strconv.Quote(pk) + `},"n":{"N":"` + strconv.FormatInt(f.items[pk], 10) + `"}}}`)
	case "UpdateItem":
		f.items[pk]++
		return 200, []byte(`{}`)
	case "PutItem":
		f.items[in.Item["pk"]["S"]] = 0
		return 200, []byte(`{}`)
	case "DeleteItem":
		delete(f.items, pk)
		return 200, []byte(`{}`)
	case "TransactWriteItems":
		f.tokens = append(f.tokens, in.ClientRequestToken)
		return 200, []byte(`{}`)
	}
	return 400, []byte(`{"__type":"com.amazonaws.dynamodb.v20120810#UnknownOperationException"}`)
}

// ServeHTTP serves the fake over a real connection; a dropped reply
// resets the connection after the request was applied.
func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, h, body, drop := f.serve(r)
	if drop {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetLinger(0) // RST, not FIN
			}
			conn.Close()
		}
		return
	}
	for k, v := range h {
		w.Header()[k] = v
	}
	if h.Get("Date") == "" && !f.skewAt.IsZero() {
		w.Header().Set("Date", f.skewAt.UTC().Format(http.TimeFormat))
	}
	w.WriteHeader(status)
	w.Write(body)
}

// start serves f on loopback until the test ends.
func (f *fake) start(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv.URL
}

// memClient is an in-memory HTTP client for the SDK (its Options.HTTPClient)
// that serves requests with the fake, for tests that run in a synctest
// bubble; a dropped reply is a connection reset after the request was
// applied.
type memClient struct{ f *fake }

func (m memClient) Do(r *http.Request) (*http.Response, error) {
	status, h, body, drop := m.f.serve(r)
	if drop {
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	if h.Get("Date") == "" {
		h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
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
