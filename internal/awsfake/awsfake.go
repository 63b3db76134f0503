// Package awsfake is a loopback fake of the parts of Amazon S3 (REST,
// path-style) and DynamoDB (JSON 1.0) that the tests of retryaws and the
// aws example use, with scripted failures: error answers, S3's 200 with an
// error body, and replies lost after the request was applied. It counts
// what it received, applied and lost. Standard library only.
package awsfake

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Answer is what the fake does with one request. The zero Answer applies
// the request and answers it.
type Answer struct {
	Status int               // an error status (with code)
	Code   string            // the error's code (S3 <Code>, DynamoDB __type)
	Header map[string]string // extra response headers
	// S3Body200Error: answer 200 with an S3 <Error> body (as S3 does for
	// CopyObject and CompleteMultipartUpload), after applying the request.
	S3Body200Error bool
	Drop           bool // apply the request, then reset the connection: the reply is lost
	// Truncate: apply the request, send the status, the headers and half
	// the body, then reset the connection: the reply is cut short.
	Truncate bool
	// Hold: apply the request, then answer only once the client gave up
	// on it (its context ended), or after 10 s.
	Hold bool
}

// Fake speaks enough of the S3 REST (path-style) and DynamoDB JSON 1.0
// protocols for the tests: GetObject, PutObject, CopyObject,
// CompleteMultipartUpload, ListObjectsV2; GetItem, PutItem, UpdateItem
// (an ADD of 1 to attribute n), DeleteItem, TransactWriteItems. Serve it
// on loopback (it is an http.Handler) or in memory (Client). Its exported
// fields may be set only while no request is in flight; the methods are
// safe for concurrent use.
type Fake struct {
	// Script, if set, chooses the Answer to the n-th request (1-based) for
	// an operation ("GetObject", "UpdateItem").
	Script func(op string, n int) Answer
	// DropRate, when set, is the share of requests (over all operations)
	// whose reply is lost after the fake applied them, drawn from a
	// generator seeded with 1 in the order the requests arrive.
	DropRate float64
	drops    *rand.Rand

	mu      sync.Mutex
	count   map[string]int   // requests received per operation
	applied map[string]int   // requests applied per operation
	dropped map[string]int   // replies lost per operation
	items   map[string]int64 // DynamoDB attribute n per key pk
	objects map[string][]byte
	tokens  []string // ClientRequestToken of each TransactWriteItems request
	seq     int      // requests received
	firsts  int      // requests whose Amz-Sdk-Request header says attempt=1
	firstAt time.Time
	lastAt  time.Time

	// SkewAt, if set, is the time the fake's Date header says on the wire
	// (a clock far from the client's makes a clock-skew error).
	SkewAt time.Time
}

// New returns a Fake with no data and no script.
func New() *Fake {
	return &Fake{count: map[string]int{}, applied: map[string]int{}, dropped: map[string]int{}, items: map[string]int64{}, objects: map[string][]byte{}}
}

// Requests returns how many requests for op the fake received.
func (f *Fake) Requests(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count[op]
}

// SetObject stores an S3 object under "bucket/key".
func (f *Fake) SetObject(path string, b []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objects[path] = b
}

// Tokens returns the ClientRequestToken of each TransactWriteItems
// request received.
func (f *Fake) Tokens() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.tokens...)
}

// ResetCounts forgets the requests counted so far.
func (f *Fake) ResetCounts() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.count)
	clear(f.applied)
	clear(f.dropped)
	f.seq, f.firsts = 0, 0
}

// Firsts returns how many of the requests received were first attempts,
// by the SDK's Amz-Sdk-Request header (attempt=1).
func (f *Fake) Firsts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.firsts
}

// Span returns the time from the first request received to the last.
func (f *Fake) Span() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastAt.Sub(f.firstAt)
}

// Total returns how many requests the fake received.
func (f *Fake) Total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.count {
		n += c
	}
	return n
}

// Applied returns how many requests for op the fake applied.
func (f *Fake) Applied(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied[op]
}

// Lost returns how many replies to op were dropped after applying it.
func (f *Fake) Lost(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped[op]
}

// Item returns DynamoDB attribute n of the item with key pk (0 if none).
func (f *Fake) Item(pk string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.items[pk]
}

// serve handles one request: it returns the status, headers and body of
// the reply, and drop when the connection must be reset instead.
func (f *Fake) serve(r *http.Request) (status int, h http.Header, body []byte, drop, truncate bool) {
	status, h, body, drop, truncate, hold := f.apply(r)
	if hold {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}
	return status, h, body, drop, truncate
}

// apply is serve up to the reply; hold says the reply must wait for the
// client to give up.
func (f *Fake) apply(r *http.Request) (status int, h http.Header, body []byte, drop, truncate, hold bool) {
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
	var a Answer
	if f.Script != nil {
		a = f.Script(op, f.count[op])
	}
	f.seq++
	if now := time.Now(); f.firstAt.IsZero() {
		f.firstAt, f.lastAt = now, now
	} else {
		f.lastAt = now
	}
	if strings.HasPrefix(r.Header.Get("Amz-Sdk-Request"), "attempt=1;") || r.Header.Get("Amz-Sdk-Request") == "attempt=1" {
		f.firsts++
	}
	if f.DropRate > 0 {
		if f.drops == nil {
			f.drops = rand.New(rand.NewPCG(1, 1))
		}
		if f.drops.Float64() < f.DropRate {
			a.Drop = true
		}
	}
	h = http.Header{}
	for k, v := range a.Header {
		h.Set(k, v)
	}
	if a.Status != 0 {
		if dynamo {
			h.Set("Content-Type", "application/x-amz-json-1.0")
			b, _ := json.Marshal(map[string]string{"__type": "com.amazonaws.dynamodb.v20120810#" + a.Code, "message": "fake " + a.Code})
			return a.Status, h, b, false, false, false
		}
		h.Set("Content-Type", "application/xml")
		return a.Status, h, s3Error(a.Code), false, false, false
	}
	f.applied[op]++
	if dynamo {
		status, body = f.dynamo(op, body)
		h.Set("Content-Type", "application/x-amz-json-1.0")
	} else {
		status, body = f.s3(op, r, body, h)
	}
	if a.S3Body200Error {
		body = s3Error("InternalError")
	}
	if a.Drop || a.Truncate {
		f.dropped[op]++
	}
	return status, h, body, a.Drop, a.Truncate, a.Hold
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
func (f *Fake) s3(op string, r *http.Request, body []byte, h http.Header) (int, []byte) {
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
func (f *Fake) dynamo(op string, body []byte) (int, []byte) {
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
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, h, body, drop, truncate := f.serve(r)
	if drop {
		reset(w)
		return
	}
	for k, v := range h {
		w.Header()[k] = v
	}
	if h.Get("Date") == "" && !f.SkewAt.IsZero() {
		w.Header().Set("Date", f.SkewAt.UTC().Format(http.TimeFormat))
	}
	if truncate {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		w.Write(body[:len(body)/2])
		reset(w) // flushes what was written first
		return
	}
	w.WriteHeader(status)
	w.Write(body)
}

// reset takes the connection of w over and resets it (RST, not FIN).
func reset(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		conn.Close()
	}
}

// Client is an in-memory HTTP client for the SDK (its Options.HTTPClient)
// that serves requests with the fake, for tests that run in a synctest
// bubble; a dropped reply is a connection reset after the request was
// applied, a truncated one a reset while its body is read.
type Client struct{ F *Fake }

func (m Client) Do(r *http.Request) (*http.Response, error) {
	status, h, body, drop, truncate := m.F.serve(r)
	if drop {
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	if h.Get("Date") == "" {
		h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	var rd io.Reader = bytes.NewReader(body)
	if truncate {
		rd = io.MultiReader(bytes.NewReader(body[:len(body)/2]), failReader{})
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(rd), ContentLength: int64(len(body)), Request: r}, nil
}

// failReader is the rest of a body whose connection was reset.
type failReader struct{}

func (failReader) Read([]byte) (int, error) {
	return 0, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}
