package retryvalkey

import (
	"context"
	"errors"

	"github.com/retrykit/retry"
	"github.com/valkey-io/valkey-go"

	"github.com/retrykit/retry/internal/rediscmd"
)

// Receive subscribes as valkey-go's Receive does, on a retry.Loop of the
// policy: valkey-go's loop subscribes again after a failure without a
// server reply (a connection lost) as the Loop says. The subscription is
// one call: its resubscriptions are its attempts, MaxAttempts counts them
// over its whole life, and MaxElapsed runs from its start. It returns nil
// when unsubscribed; otherwise, after one attempt, its failure as valkey-go
// gives it (the context's error when ctx ended), and after more, the
// Loop's *retry.Error, which wraps it (errors.Is matches the context's).
func (c *client) Receive(ctx context.Context, subscribe valkey.Completed, fn func(valkey.PubSubMessage)) error {
	return c.receive(ctx, c.Client, subscribe, fn)
}

// receive is Receive through to.
func (c *client) receive(ctx context.Context, to valkey.CoreClient, subscribe valkey.Completed, fn func(valkey.PubSubMessage)) error {
	k := keep(&subscribe)
	defer k.release()
	cl := c.r.begin(ctx, k, true)
	defer c.r.end(cl)
	// Registered for the whole call: valkey-go keeps a subscription
	// command that failed, and it is sent again as it is.
	c.r.register(cl, &subscribe)
	var last error
	err := c.run(ctx, cl, func(ctx context.Context) error {
		cl.ctx = ctx
		last = to.Receive(ctx, subscribe, fn)
		return sentOnce(ctx, cl, last, true)
	})
	var re *retry.Error
	if errors.As(err, &re) && re.Attempts == 1 && last != nil {
		return last // one send: its own failure, without the loop's wrapping
	}
	return err
}

// sentOnce is what a call's Loop is told of err, the failure (nil for
// none) of a send through valkey-go's loop, which asked the Loop about
// every repeat it made: nil, err when ctx ended (ReasonContext), err when
// again says that the call sends again itself a command valkey-go did not
// repeat because another call shared it (see delay) and that failed
// without a reply, and otherwise err marked permanent.
func sentOnce(ctx context.Context, cl *call, err error, again bool) error {
	if err == nil || valkey.IsValkeyNil(err) {
		return nil
	}
	if cl.stop != nil || ctx.Err() != nil {
		return err
	}
	if o := classify(err); again && (o == rediscmd.OutcomeNotSent || o == rediscmd.OutcomeMaybeApplied) &&
		!errors.Is(err, valkey.ErrDedicatedClientRecycled) && cl.shared.Load() {
		return err
	}
	return retry.Permanent(err)
}
