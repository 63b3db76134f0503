package retryredis_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/internal/faultproxy"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retryredis"
)

// waitBusy waits until srv answers BUSY: the script runs (its INCR done).
func waitBusy(t *testing.T, srv *redistest.Server) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; {
		if _, err := srv.Do("PING"); err != nil && strings.HasPrefix(err.Error(), "BUSY") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the script never made the server busy")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestClosedInFlight: a client closed while a command is in flight (the
// server ran it and is still busy) reports "may have been applied", never
// "not sent".
func TestClosedInFlight(t *testing.T) {
	srv := redistest.Start(t)
	if _, err := srv.Do("CONFIG", "SET", "busy-reply-threshold", "10"); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1, PoolSize: 4})
	if err := retryredis.AddHook(context.Background(), c, testPolicy()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- c.Eval(ctx, redistest.SlowIncr, []string{"k"}).Err() }()
	waitBusy(t, srv)
	c.Close()
	err := <-done
	if !errors.Is(err, retry.ErrMaybeApplied) || errors.Is(err, retry.ErrNotSent) {
		t.Fatalf("EVAL in flight when the client closed: %v; want retry.ErrMaybeApplied", err)
	}
}

// TestNotSentAfterLostReply: a SET (safe to repeat) loses its reply, then
// every resend meets a refused dial. The server applied the first SET, so
// the call's error must not say "not sent".
func TestNotSentAfterLostReply(t *testing.T) {
	srv := redistest.Start(t)
	var once atomic.Bool
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: func(n string) bool {
		return n == "set" && once.CompareAndSwap(false, true)
	}})
	p := testPolicy()
	p.MaxAttempts = 3
	p.Observer = retry.ObserverFunc(func(_ context.Context, e retry.Event) {
		if e.Kind == retry.EventRetry {
			px.SetRefuse(true) // the resends are not sent
		}
	})
	c := newClient(t, px.Addr(), p)
	err := c.Set(context.Background(), "k", "v", 0).Err()
	if v, _ := srv.Do("GET", "k"); v != "v" {
		t.Fatalf("k = %q; want v (the first SET applied)", v)
	}
	var re *retry.Error
	if errors.Is(err, retry.ErrNotSent) || !errors.Is(err, retry.ErrMaybeApplied) || !errors.As(err, &re) || re.Attempts != 3 {
		t.Fatalf("SET applied, then not sent twice: %v; want retry.ErrMaybeApplied after 3 attempts, not retry.ErrNotSent", err)
	}

	// The same for a pipeline of safe commands.
	px.SetRefuse(false)
	once.Store(false)
	_, err = c.Pipelined(context.Background(), func(pl redis.Pipeliner) error {
		pl.Set(context.Background(), "p", "1", 0)
		pl.Get(context.Background(), "p")
		return nil
	})
	if errors.Is(err, retry.ErrNotSent) || !errors.Is(err, retry.ErrMaybeApplied) {
		t.Fatalf("pipeline applied, then not sent: %v; want retry.ErrMaybeApplied, not retry.ErrNotSent", err)
	}
}

// TestThrottledAfterLostReply: a SET whose reply was lost, then the
// Throttle rejects every resend: nothing was sent after the first SET, but
// the call's error must still say that it may have been applied (and
// still match retry.ErrThrottled), for a command and for a pipeline.
func TestThrottledAfterLostReply(t *testing.T) {
	srv := redistest.Start(t)
	for _, pipeline := range []bool{false, true} {
		var once atomic.Bool
		px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: func(n string) bool {
			return n == "set" && once.CompareAndSwap(false, true)
		}})
		th, _ := retry.NewThrottle(retry.ThrottleConfig{MaxProbability: 1})
		p := testPolicy()
		p.MaxAttempts = 3
		p.Throttle = th
		kept := make(chan string, 4) // what an Observer that keeps EventDone.Err reads later
		var readers sync.WaitGroup
		defer readers.Wait()
		p.Observer = retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			if e.Kind == retry.EventDone && e.Err != nil {
				readers.Go(func() { kept <- e.Err.Error() }) // the error must not change under it (-race)
			}
			if e.Kind == retry.EventRetry {
				for range 1 << 20 { // then it rejects with probability 1 - 2^-20
					account.Record(th, false)
				}
			}
		})
		c := newClient(t, px.Addr(), p)
		var err error
		if pipeline {
			_, err = c.Pipelined(context.Background(), func(pl redis.Pipeliner) error {
				pl.Set(context.Background(), "k", "v", 0)
				pl.Get(context.Background(), "k")
				return nil
			})
		} else {
			err = c.Set(context.Background(), "k", "v", 0).Err()
		}
		if v, _ := srv.Do("GET", "k"); v != "v" {
			t.Fatalf("pipeline %v: k = %q; want v (the first SET applied)", pipeline, v)
		}
		if !errors.Is(err, retry.ErrThrottled) || !errors.Is(err, retry.ErrMaybeApplied) || errors.Is(err, retry.ErrNotSent) {
			t.Fatalf("pipeline %v: SET applied, then throttled: %v; want retry.ErrMaybeApplied and ErrThrottled", pipeline, err)
		}
		if _, err := srv.Do("DEL", "k"); err != nil {
			t.Fatal(err)
		}
	}
}
