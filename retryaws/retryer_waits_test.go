package retryaws_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/awsfake"
	"github.com/retrykit/retry/internal/fleetseam"
	"github.com/retrykit/retry/retryaws"
	"github.com/retrykit/retry/retrytest"
)

// line returns the events r recorded as short lines, joined.
func line(r *retrytest.Recorder) string {
	var out []string
	for _, e := range r.Events() {
		s := fmt.Sprintf("%s %d", e.Kind, e.Attempt)
		switch e.Kind {
		case retry.EventRetry:
			s += " delay=" + e.Delay.String()
		case retry.EventDone:
			s += fmt.Sprintf(" waited=%v reason=%d", e.Waited, e.Reason)
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// The waits are the policy's, to the nanosecond, and every step reaches
// the Observer as retry.Do reports it.
func TestWaitsAndEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := awsfake.New()
		f.SetObject("b/k", []byte("hello"))
		f.Script = failFirst("GetObject", 2, awsfake.Answer{Status: 503, Code: "SlowDown"})
		rec := &retrytest.Recorder{}
		p := retry.Policy{Initial: 100 * time.Millisecond, Jitter: retry.NoJitter(), MaxAttempts: 4, Observer: rec}
		s, d := clients("http://fake.invalid", newRetryer(t, p), awsfake.Client{F: f})
		start := time.Now()
		if err := opGetObject.call(context.Background(), s, d); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 300*time.Millisecond {
			t.Errorf("the call took %v, want the policy's 100 ms + 200 ms", got)
		}
		if got := f.Requests("GetObject"); got != 3 {
			t.Errorf("requests %d, want 3", got)
		}
		want := "attempt 1, retry 1 delay=100ms, attempt 2, retry 2 delay=200ms, attempt 3, done 3 waited=300ms reason=0"
		if got := line(rec); got != want {
			t.Errorf("events\n got %s\nwant %s", got, want)
		}
	})
}

func TestAttemptsUsedUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := awsfake.New()
		f.Script = failFirst("GetItem", 99, awsfake.Answer{Status: 500, Code: "InternalServerError"})
		rec := &retrytest.Recorder{}
		p := retry.Policy{Initial: 10 * time.Millisecond, Jitter: retry.NoJitter(), MaxAttempts: 3, Observer: rec}
		s, d := clients("http://fake.invalid", newRetryer(t, p), awsfake.Client{F: f})
		err := opGetItem.call(context.Background(), s, d)
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonAttempts || re.Attempts != 3 {
			t.Fatalf("err = %v, want a *retry.Error for 3 attempts used up", err)
		}
		if !strings.Contains(err.Error(), "InternalServerError") {
			t.Errorf("the service's error is lost: %v", err)
		}
		want := fmt.Sprintf("attempt 1, retry 1 delay=10ms, attempt 2, retry 2 delay=20ms, attempt 3, done 3 waited=30ms reason=%d", retry.ReasonAttempts)
		if got := line(rec); got != want {
			t.Errorf("events\n got %s\nwant %s", got, want)
		}
	})
}

// x-amz-retry-after: the wait is max(policy's wait, header + up to a tenth
// of it), never the SDK's own stretching (which clamps the header to
// [wait, wait + 5 s]); a header above the cap ends the call at once.
func TestRetryAfterHeader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header string
		lo, hi time.Duration // the wait
		fails  bool
	}{
		{"below the policy's wait", "50", 100 * time.Millisecond, 100 * time.Millisecond, false},
		{"above it", "1500", 1500 * time.Millisecond, 1650 * time.Millisecond, false},
		{"beyond the SDK's 5 s stretch", "20000", 20 * time.Second, 21 * time.Second, false},
		{"beyond the cap", "600000", 0, 0, true},
		{"not a number", "soon", 100 * time.Millisecond, 100 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := awsfake.New()
				f.Script = failFirst("GetItem", 1, awsfake.Answer{Status: 400, Code: "ThrottlingException", Header: map[string]string{"X-Amz-Retry-After": tc.header}})
				p := retry.Policy{Initial: 100 * time.Millisecond, Jitter: retry.NoJitter(), MaxAttempts: 3}
				s, d := clients("http://fake.invalid", newRetryer(t, p), awsfake.Client{F: f})
				start := time.Now()
				err := opGetItem.call(context.Background(), s, d)
				took := time.Since(start)
				if tc.fails {
					if err == nil || f.Requests("GetItem") != 1 || took != 0 {
						t.Fatalf("err %v after %d requests in %v, want the throttling error at once", err, f.Requests("GetItem"), took)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if took < tc.lo || took > tc.hi {
					t.Errorf("waited %v, want [%v, %v]", took, tc.lo, tc.hi)
				}
			})
		})
	}
}

// An x-amz-retry-after too large for a time.Duration (in milliseconds, or
// in digits) counts as more than any cap, the longest one included, as in
// retrygrpc and retrygax: the call ends at once instead of waiting 292
// years.
func TestRetryAfterSaturatedBeyondAnyCap(t *testing.T) {
	for _, header := range []string{"9223372036855", "99999999999999999999"} {
		t.Run(header, func(t *testing.T) { retryAfterBeyondAnyCap(t, header) })
	}
}

func retryAfterBeyondAnyCap(t *testing.T, header string) {
	synctest.Test(t, func(t *testing.T) {
		f := awsfake.New()
		f.Script = failFirst("GetItem", 1, awsfake.Answer{Status: 400, Code: "ThrottlingException", Header: map[string]string{"X-Amz-Retry-After": header}})
		p := retry.Policy{Initial: 100 * time.Millisecond, MaxAttempts: 3}
		s, d := clients("http://fake.invalid", newRetryer(t, p, retryaws.WithMaxServerWait(math.MaxInt64)), awsfake.Client{F: f})
		start := time.Now()
		err := opGetItem.call(context.Background(), s, d)
		if err == nil || f.Requests("GetItem") != 1 || time.Since(start) != 0 {
			t.Fatalf("err %v after %d requests in %v, want the throttling error at once", err, f.Requests("GetItem"), time.Since(start))
		}
	})
}

// No wait starts that would end at or after the context's deadline, and a
// context cancelled during a wait ends it at once, with the last error.
func TestContextEndsTheRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := awsfake.New()
		f.Script = failFirst("GetItem", 99, awsfake.Answer{Status: 503, Code: "ServiceUnavailable"})
		rec := &retrytest.Recorder{}
		p := retry.Policy{Initial: 100 * time.Millisecond, Jitter: retry.NoJitter(), MaxAttempts: 9, Observer: rec}
		s, d := clients("http://fake.invalid", newRetryer(t, p), awsfake.Client{F: f})

		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := opGetItem.call(ctx, s, d)
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonDeadline || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ReasonDeadline matching context.DeadlineExceeded", err)
		}
		if took := time.Since(start); took != 100*time.Millisecond || f.Requests("GetItem") != 2 {
			t.Fatalf("gave up after %v and %d requests, want 100ms and 2 (the 200 ms wait would pass the deadline)", took, f.Requests("GetItem"))
		}

		ctx2, cancel2 := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel2)
		start = time.Now()
		err = opGetItem.call(ctx2, s, d)
		if !errors.As(err, &re) || re.Reason != retry.ReasonContext || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "ServiceUnavailable") {
			t.Fatalf("err = %v, want ReasonContext matching context.Canceled and keeping the service's error", err)
		}
		if took := time.Since(start); took != 50*time.Millisecond {
			t.Fatalf("the cancel ended the wait after %v, want 50ms", took)
		}
		if got := line(rec); !strings.HasSuffix(got, fmt.Sprintf("done 1 waited=50ms reason=%d", retry.ReasonContext)) {
			t.Errorf("events %s, want the EventDone of a wait cut short at 50 ms", got)
		}
	})
}

// A Budget and a Throttle see every attempt: the Budget's refusal ends the
// call, and a Throttle that rejects an attempt makes it count without a
// request.
func TestBudgetAndThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := awsfake.New()
		f.Script = failFirst("GetItem", 999, awsfake.Answer{Status: 503, Code: "ServiceUnavailable"})
		b, err := retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: 0.2, Window: 10 * time.Second}) // 2 retries per window
		if err != nil {
			t.Fatal(err)
		}
		p := retry.Policy{Initial: time.Millisecond, Jitter: retry.NoJitter(), MaxAttempts: 10, Budget: b}
		s, d := clients("http://fake.invalid", newRetryer(t, p), awsfake.Client{F: f})
		err = opGetItem.call(context.Background(), s, d)
		if !errors.Is(err, retry.ErrBudgetRefused) || f.Requests("GetItem") != 3 {
			t.Fatalf("err %v after %d requests, want ErrBudgetRefused after 3", err, f.Requests("GetItem"))
		}
		if firsts, retries := fleetseam.BudgetOf[*retry.Budget]().LocalCounts(b); firsts != 1 || retries != 2 {
			t.Fatalf("budget counted %d first attempts and %d retries, want 1 and 2", firsts, retries)
		}

		th, err := retry.NewThrottle(retry.ThrottleConfig{K: 1, CountRejected: true})
		if err != nil {
			t.Fatal(err)
		}
		f2 := awsfake.New()
		f2.Script = failFirst("GetItem", 999, awsfake.Answer{Status: 503, Code: "ServiceUnavailable"})
		p = retry.Policy{Initial: time.Millisecond, Jitter: retry.NoJitter(), MaxAttempts: 50, Throttle: th}
		s, d = clients("http://fake.invalid", newRetryer(t, p), awsfake.Client{F: f2})
		err = opGetItem.call(context.Background(), s, d)
		var re *retry.Error
		if !errors.As(err, &re) || re.Attempts != 50 {
			t.Fatalf("err %v, want 50 attempts used up", err)
		}
		requests, accepts := fleetseam.ThrottleOf[*retry.Throttle]().LocalCounts(th)
		if sent := f2.Requests("GetItem"); sent >= 50 || requests != 50 || accepts != 0 {
			t.Fatalf("the server saw %d requests, the Throttle counted %d requests and %d accepts; want fewer than 50 sent, 50 and 0 counted", sent, requests, accepts)
		}

		// Later calls meet a Throttle that rejects most attempts, their
		// first ones included: every attempt is either sent (EventAttempt)
		// or rejected (EventThrottled), and the Throttle (CountRejected)
		// counts both.
		var sentEv, throttledEv, firstThrottled int
		obs := retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			switch e.Kind {
			case retry.EventAttempt:
				sentEv++
			case retry.EventThrottled:
				throttledEv++
				if e.Attempt == 1 {
					firstThrottled++
				}
			}
		})
		p = retry.Policy{Initial: time.Millisecond, Jitter: retry.NoJitter(), MaxAttempts: 5, Throttle: th, Observer: obs}
		f2.ResetCounts()
		s, d = clients("http://fake.invalid", newRetryer(t, p), awsfake.Client{F: f2})
		for range 20 {
			_ = opGetItem.call(context.Background(), s, d)
		}
		after, _ := fleetseam.ThrottleOf[*retry.Throttle]().LocalCounts(th)
		if sentEv != f2.Requests("GetItem") || int64(sentEv+throttledEv) != after-requests || firstThrottled == 0 {
			t.Fatalf("%d EventAttempt for %d requests sent, %d EventThrottled (%d of first attempts), the Throttle counted %d", sentEv, f2.Requests("GetItem"), throttledEv, firstThrottled, after-requests)
		}
	})
}

// The SDK lets AWS_MAX_ATTEMPTS, max_attempts in the shared config, or
// Options.RetryMaxAttempts replace a custom retryer's attempt limit: such
// a call is refused unsent.
func TestMaxAttemptsOverrideRefused(t *testing.T) {
	f := awsfake.New()
	url := start(t, f)
	r := newRetryer(t, quick)
	_, d := clients(url, r, nil)
	if err := opGetItem.call(ctxTimeout(t), nil, d); err != nil {
		t.Fatalf("without an override: %v", err)
	}
	f.ResetCounts()

	dir := t.TempDir()
	shared := filepath.Join(dir, "config")
	if err := os.WriteFile(shared, []byte("[default]\nmax_attempts = 4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		client func(t *testing.T) *dynamodb.Client
		opt    func(*dynamodb.Options) // per operation
	}{
		// config.WithRetryer keeps the SDK from reading them; a Retryer set
		// after loading, on the aws.Config or a client, does not.
		{"AWS_MAX_ATTEMPTS, aws.Config.Retryer", func(t *testing.T) *dynamodb.Client {
			env(t, filepath.Join(dir, "none"))
			t.Setenv("AWS_MAX_ATTEMPTS", "5")
			cfg := loadConfig(t, url)
			cfg.Retryer = func() aws.Retryer { return r }
			return dynamodb.NewFromConfig(cfg)
		}, nil},
		{"max_attempts, Options.Retryer", func(t *testing.T) *dynamodb.Client {
			env(t, shared)
			return dynamodb.NewFromConfig(loadConfig(t, url), func(o *dynamodb.Options) { o.Retryer = r })
		}, nil},
		{"Options.RetryMaxAttempts", func(t *testing.T) *dynamodb.Client {
			return dynamodb.New(d.Options(), func(o *dynamodb.Options) { o.RetryMaxAttempts = 2 })
		}, nil},
		{"per operation", func(t *testing.T) *dynamodb.Client { return d }, func(o *dynamodb.Options) { o.RetryMaxAttempts = 7 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.client(t)
			var opts []func(*dynamodb.Options)
			if tc.opt != nil {
				opts = append(opts, tc.opt)
			}
			_, err := c.GetItem(ctxTimeout(t), getItemInput(), opts...)
			if !errors.Is(err, retryaws.ErrMaxAttemptsOverride) || !retry.IsExhausted(err) {
				t.Fatalf("err = %v, want ErrMaxAttemptsOverride", err)
			}
			if n := f.Total(); n != 0 {
				t.Fatalf("%d requests sent, want none", n)
			}
		})
	}
	t.Run("config.WithRetryer ignores them", func(t *testing.T) {
		env(t, shared)
		t.Setenv("AWS_MAX_ATTEMPTS", "5")
		c := dynamodb.NewFromConfig(loadConfig(t, url, config.WithRetryer(func() aws.Retryer { return r })))
		if _, err := c.GetItem(ctxTimeout(t), getItemInput()); err != nil || f.Total() != 1 {
			t.Fatalf("err %v after %d requests, want success after 1", err, f.Total())
		}
	})
}

// env points the SDK's shared config at file, and its credentials file
// at nothing, and turns the EC2 metadata service off.
func env(t *testing.T, file string) {
	t.Setenv("AWS_CONFIG_FILE", file)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", file+".none")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// loadConfig loads the SDK's default configuration (the environment and
// shared config file the test set up) for url, with static credentials.
func loadConfig(t *testing.T, url string, opts ...func(*config.LoadOptions) error) aws.Config {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(ctxTimeout(t), append([]func(*config.LoadOptions) error{
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDFAKE", "secretfake", "")),
		config.WithBaseEndpoint(url),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
