package retryaws_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/internal/awsfake"
	"github.com/retrykit/retry/internal/fleetseam"
	"github.com/retrykit/retry/retryaws"
	"github.com/retrykit/retry/retrytest"
)

// A connection that could not be made sent nothing: an unsafe write is
// retried, and the caller never hears that it may have been applied. (The
// SDK wraps a transport error in a ResponseError with an empty response of
// status 0, which must not read as an answer.)
func TestDialErrorIsRetriedForAnUnsafeWrite(t *testing.T) {
	f := awsfake.New()
	u, err := url.Parse(start(t, f))
	if err != nil {
		t.Fatal(err)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close() // a loopback port with nothing listening: the dial is refused
	var dials atomic.Int32
	var d net.Dialer
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		if dials.Add(1) <= 2 {
			return d.DialContext(ctx, network, refused)
		}
		return d.DialContext(ctx, network, u.Host)
	}}}
	t.Cleanup(hc.CloseIdleConnections)
	_, db := clients(u.String(), newRetryer(t, quick), hc)
	if err := opUpdateItem.call(ctxTimeout(t), nil, db); err != nil {
		t.Fatalf("UpdateItem after two refused dials: %v (ErrMaybeApplied %v)", err, errors.Is(err, retry.ErrMaybeApplied))
	}
	if dials.Load() != 3 || f.Requests("UpdateItem") != 1 || f.Item("c") != 1 {
		t.Fatalf("%d dials, %d requests, counter %d; want 3, 1, 1", dials.Load(), f.Requests("UpdateItem"), f.Item("c"))
	}
}

// failAttempt1 is an APIOptions function that makes the first attempt of
// every call fail with err before it is sent, from a Finalize middleware
// after the SDK's retry loop (where a user's middleware or interceptor
// sits).
func failAttempt1(err error) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("failAttempt1", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			if in.Request.(*smithyhttp.Request).Header.Get("Amz-Sdk-Request") == "attempt=1" {
				return middleware.FinalizeOutput{}, middleware.Metadata{}, err
			}
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
	}
}

// retryableErr is an error that the SDK's classifiers retry.
type retryableErr struct{ msg string }

func (e *retryableErr) Error() string        { return e.msg }
func (e *retryableErr) RetryableError() bool { return true }

type sliceErr []string

func (sliceErr) Error() string { return "a slice" }

// valueErr is a comparable struct type whose field may hold a value that
// cannot be a map key.
type valueErr struct{ inner error }

func (v valueErr) Error() string        { return "value: " + v.inner.Error() }
func (v valueErr) Unwrap() error        { return v.inner }
func (v valueErr) RetryableError() bool { return true }

// An attempt error of a comparable type holding an unhashable value is no
// reason to panic: the call retries as the policy says.
func TestUnhashableErrorValue(t *testing.T) {
	f := awsfake.New()
	_, d := clients("http://fake.invalid", newRetryer(t, quick), awsfake.Client{F: f})
	for _, e := range []error{valueErr{sliceErr{"x"}}, &retryableErr{"wrapped"}} {
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("panic: %v", p)
				}
			}()
			_, err = d.GetItem(context.Background(), getItemInput(), func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, failAttempt1(e)) })
		}()
		if err != nil || f.Requests("GetItem") != 1 {
			t.Fatalf("%T: err %v after %d requests, want success at the second attempt", e, err, f.Requests("GetItem"))
		}
		f.ResetCounts()
	}
}

// The state of a call whose attempts fail with such an error is kept too:
// the EventDone counts every wait.
func TestUnhashableErrorKeepsTheCallsState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := awsfake.New()
		var rec retrytest.Recorder
		p := retry.Policy{Initial: 10 * time.Millisecond, Jitter: retry.NoJitter(), MaxAttempts: 3, Observer: &rec}
		_, d := clients("http://fake.invalid", newRetryer(t, p), awsfake.Client{F: f})
		always := func(st *middleware.Stack) error {
			return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("failAlways", func(context.Context, middleware.FinalizeInput, middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				return middleware.FinalizeOutput{}, middleware.Metadata{}, valueErr{sliceErr{"x"}}
			}), middleware.After)
		}
		_, err := d.GetItem(context.Background(), getItemInput(), func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, always) })
		var re *retry.Error
		done, _ := rec.Done()
		if waited := done.Waited; !errors.As(err, &re) || re.Attempts != 3 || waited != 30*time.Millisecond {
			t.Fatalf("err %v, EventDone waited %v; want 3 attempts used up after 10 ms + 20 ms", err, waited)
		}
	})
}

// interleave is a Retryer wrapper (as a user may write one: Check sees
// through it) whose IsErrorRetryable, which the SDK calls between an
// attempt's release and GetRetryToken, holds the first call that fails
// with shared until a second one has failed with it too, and holds the
// second until the first has ended.
type interleave struct {
	*retryaws.Retryer
	shared              error
	n                   atomic.Int32
	firstHeld, secondIn chan struct{}
	firstDone           chan struct{}
	t                   *testing.T
}

func (w *interleave) IsErrorRetryable(err error) bool {
	if errors.Is(err, w.shared) {
		switch w.n.Add(1) {
		case 1:
			close(w.firstHeld)
			w.wait(w.secondIn)
		case 2:
			close(w.secondIn)
			w.wait(w.firstDone)
		}
	}
	return w.Retryer.IsErrorRetryable(err)
}

func (w *interleave) wait(c chan struct{}) {
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		w.t.Error("interleave: timed out")
	}
}

// Two calls whose attempts fail at the same moment with one shared error
// value (a package-level error of a user's middleware) keep their own
// state: the UpdateItem is never repeated after a lost reply as if it
// were the other call's GetItem.
func TestSharedErrorValueKeepsEachCallsClass(t *testing.T) {
	f := awsfake.New()
	f.Script = failFirst("UpdateItem", 1, awsfake.Answer{Drop: true}) // the second attempt's reply is lost
	shared := &retryableErr{"shared: local limit reached"}
	w := &interleave{Retryer: newRetryer(t, quick), shared: shared, firstHeld: make(chan struct{}), secondIn: make(chan struct{}), firstDone: make(chan struct{}), t: t}
	if err := retryaws.Check(w); err != nil {
		t.Fatal(err)
	}
	_, d := clients("http://fake.invalid", w, awsfake.Client{F: f})
	opt := func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, failAttempt1(shared)) }
	update := make(chan error, 1)
	go func() {
		_, err := d.UpdateItem(context.Background(), updateItemInput(), opt)
		close(w.firstDone)
		update <- err
	}()
	<-w.firstHeld
	_, getErr := d.GetItem(context.Background(), getItemInput(), opt)
	err := <-update
	if got := f.Item("c"); got != 1 || !errors.Is(err, retry.ErrMaybeApplied) {
		t.Fatalf("counter %d after %d UpdateItem requests, err %v; want 1, the lost reply ending the call with ErrMaybeApplied", got, f.Requests("UpdateItem"), err)
	}
	if getErr != nil {
		t.Fatalf("GetItem: %v", getErr)
	}
}

func updateItemInput() *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: getItemInput().Key, UpdateExpression: aws.String("ADD n :one"),
		ExpressionAttributeValues: map[string]ddb.AttributeValue{":one": &ddb.AttributeValueMemberN{Value: "1"}}}
}

// Once an attempt of a write lost its reply, the call's error matches
// ErrMaybeApplied whatever the later attempts met: a caller who sees a
// throttling error alone would send the write again, with a new
// idempotency token.
func TestMaybeAppliedIsSticky(t *testing.T) {
	plain := func(c context.Context) context.Context { return c }
	for _, tc := range []struct {
		name  string
		op    operation
		ctx   func(context.Context) context.Context
		maybe bool
	}{
		{"TransactWriteItems", opTransact, plain, true},
		{"PutItem", opPutItem, plain, true},
		{"UpdateItem with MarkSafe", opUpdateItem, retryaws.MarkSafe, true},
		{"GetItem", opGetItem, plain, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := awsfake.New()
			f.Script = func(op string, n int) awsfake.Answer {
				if n == 1 {
					return awsfake.Answer{Drop: true}
				}
				return awsfake.Answer{Status: 400, Code: "ThrottlingException"}
			}
			_, d := clients("http://fake.invalid", newRetryer(t, quick), awsfake.Client{F: f})
			err := tc.op.call(tc.ctx(context.Background()), nil, d)
			var re *retry.Error
			if !errors.As(err, &re) || re.Reason != retry.ReasonAttempts || f.Requests(tc.op.name) != 4 || f.Applied(tc.op.name) != 1 {
				t.Fatalf("err %v after %d requests (%d applied), want the 4 attempts used up, the first applied", err, f.Requests(tc.op.name), f.Applied(tc.op.name))
			}
			if got := errors.Is(err, retry.ErrMaybeApplied); got != tc.maybe {
				t.Fatalf("ErrMaybeApplied %v, want %v: %v", got, tc.maybe, err)
			}
		})
	}
}

// A Class that is none of the four is refused by New: it must not read as
// safe to repeat.
func TestUnknownClassRefused(t *testing.T) {
	r, err := retryaws.New(quick, retryaws.WithClass(retryaws.ServiceDynamoDB, retryaws.Class(9), "UpdateItem"))
	if err == nil || r != nil {
		t.Fatalf("New with Class(9) = %v, %v; want an error", r, err)
	}
	t.Log(err)
}

// A nil *Retryer (New's result when its error was ignored) makes each call
// fail unsent with an error, not panic; Check reports it.
func TestNilRetryer(t *testing.T) {
	f := awsfake.New()
	var r *retryaws.Retryer
	_, d := clients("http://fake.invalid", r, awsfake.Client{F: f})
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("panic: %v", p)
			}
		}()
		err = opGetItem.call(context.Background(), nil, d)
	}()
	if err == nil || f.Total() != 0 || !retry.IsExhausted(err) {
		t.Fatalf("err %v after %d requests, want an error and none sent", err, f.Total())
	}
	if err := retryaws.Check(d.Options().Retryer); err == nil {
		t.Fatal("Check of a nil *Retryer = nil")
	}
}

// A call whose first attempt the Throttle rejected earns the Budget no
// first attempt, as in retry.Do: the attempts it then sends are retries.
func TestThrottledFirstAttemptEarnsNoBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := awsfake.New()
		f.Script = failFirst("GetItem", 1<<30, awsfake.Answer{Status: 503, Code: "ServiceUnavailable"})
		th, err := retry.NewThrottle(retry.ThrottleConfig{K: 1, MaxProbability: 1})
		if err != nil {
			t.Fatal(err)
		}
		for range 50 { // a backend that rejects everything: the Throttle rejects most attempts
			account.Record(th, false)
		}
		b, err := retry.NewBudget(retry.BudgetConfig{Ratio: 1, MinPerSecond: 1000, Window: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var firstThrottled int
		obs := retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			if e.Kind == retry.EventThrottled && e.Attempt == 1 {
				firstThrottled++
			}
		})
		p := retry.Policy{Initial: time.Millisecond, Jitter: retry.NoJitter(), MaxAttempts: 3, Throttle: th, Budget: b, Observer: obs}
		_, d := clients("http://fake.invalid", newRetryer(t, p), awsfake.Client{F: f})
		const calls = 40
		for range calls {
			_ = opGetItem.call(context.Background(), nil, d)
		}
		if firsts, _ := fleetseam.BudgetOf[*retry.Budget]().LocalCounts(b); firstThrottled == 0 || firsts != int64(calls-firstThrottled) {
			t.Fatalf("the Budget counted %d first attempts for %d calls, %d of whose first attempts the Throttle rejected; want %d", firsts, calls, firstThrottled, calls-firstThrottled)
		}
	})
}

// A Token operation is repeated with its token only while the service
// still knows it: DynamoDB forgets a ClientRequestToken 10 minutes after
// the request that used it, and a repeat after that could apply the
// transaction twice.
func TestTokenNotRepeatedAfterItsWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := awsfake.New()
		f.Script = func(op string, n int) awsfake.Answer {
			if n == 1 {
				return awsfake.Answer{Drop: true}
			}
			return awsfake.Answer{Status: 400, Code: "ThrottlingException"}
		}
		// Waits of 1, 2, 4, then 8 minutes: the fourth would end 15 minutes after the lost reply.
		p := retry.Policy{Initial: time.Minute, MaxDelay: time.Hour, Jitter: retry.NoJitter(), MaxAttempts: 10}
		_, d := clients("http://fake.invalid", newRetryer(t, p), awsfake.Client{F: f})
		start := time.Now()
		err := opTransact.call(context.Background(), nil, d)
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonTimeBudget || !errors.Is(err, retry.ErrMaybeApplied) {
			t.Fatalf("err %v, want ReasonTimeBudget matching ErrMaybeApplied", err)
		}
		if f.Requests("TransactWriteItems") != 4 || f.Span() >= retryaws.TokenWindow || time.Since(start) != 7*time.Minute {
			t.Fatalf("%d requests over %v, gave up after %v; want 4 within %v, giving up at 7 min", f.Requests("TransactWriteItems"), f.Span(), time.Since(start), retryaws.TokenWindow)
		}
	})
}
