package retryvalkey

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/rediscmd"
	"github.com/valkey-io/valkey-go"
)

// retryer is valkey-go's RetryDelay built from a Policy, and the calls of
// the client in flight. valkey-go calls delay after every failed attempt it
// may retry, with the attempts made so far, on the goroutine of the call
// (or, for a cluster's pipeline, of one of its nodes), and gives it the
// command but no context: delay finds the call's retry.Loop from the
// command's first word, whose address the call registered before its
// first send. The zero retryer (with a valid p) is ready to use.
type retryer struct {
	p retry.Policy

	// The calls by the address of a registered command's first word (see
	// registry.go): one word per bucket in the bucket, the others in calls.
	b     [buckets]bucket
	mu    sync.Mutex
	calls map[*string]slot // guarded by mu, taken with the word's bucket's
}

// call is one call of a method that valkey-go's loop may repeat (Do,
// DoCache, DoMulti, DoMultiCache, Receive, also on a dedicated client or
// a node's): its retry.Loop, which the call's
// own resends and valkey-go's repeats of its first send both drive (under
// mu: a cluster's pipeline asks from several goroutines), and what those
// repeats learned.
type call struct {
	mu       sync.Mutex
	l        retry.Loop
	ctx      context.Context // the context of the send in progress, for the Loop's events and deadline
	pipeline bool            // DoMulti, DoMultiCache, Receive: its errors are judged bare
	round    int             // valkey-go's attempt number last judged, 0 for none
	wait     time.Duration   // the answer given for round
	stop     error           // the *retry.Error that ended the call in delay; nil while it goes on
	maybe    bool            // a repeat of a single command lost its reply
	keys     []*string       // the registered first words

	// Read by other goroutines (a register of the same word, a delay):
	// atomic, and never reset by assigning the whole call.
	shared atomic.Bool  // another call registered one of its words while it had it
	over   atomic.Bool  // the first send returned (or the call ended): delay no longer drives l
	asked  atomic.Int32 // the delays in progress that found the call
}

// begin returns the state of a new call, its Loop at its first attempt,
// kept in k, the call's first command, and pooled with it. Call register
// for each command that valkey-go's loop may repeat, and end when the call
// returns, before k is released.
func (r *retryer) begin(ctx context.Context, k *kept, pipeline bool) *call {
	c := &k.call
	c.l, c.ctx, c.pipeline = r.p.Loop(), ctx, pipeline
	c.round, c.wait, c.stop, c.maybe, c.keys = 0, 0, nil, false, c.keys[:0]
	if c.shared.Load() {
		c.shared.Store(false)
	}
	if c.over.Load() {
		c.over.Store(false)
	}
	return c
}

// reset clears c but for its atomic fields (see call; over stays true)
// and the array of its keys, kept for the next call.
func (c *call) reset() {
	c.l, c.ctx, c.pipeline, c.round, c.wait, c.stop, c.maybe = retry.Loop{}, nil, false, 0, 0, nil, false
	c.keys = c.keys[:0]
}

// end unregisters c if it has not done so, and clears it.
func (r *retryer) end(c *call) {
	r.unregister(c)
	c.reset()
}

// delay is the RetryDelayFn: attempts is the number of attempts valkey-go
// made, the failed one included. It returns the wait before the next
// attempt, or -1 to stop. For a registered call, the call's Loop judges the
// failure (Failed) and begins the next attempt before valkey-go waits, so
// that a retry the Throttle rejects costs its attempt and the next wait,
// as in retry.Do; when the Loop gives up, the call ends with its error.
// It may block, in a wait after a rejection, on valkey-go's goroutine. A
// command that lookup does not attribute to one call is not repeated
// (-1): a shared command's calls send it again themselves, on their own
// Loops.
func (r *retryer) delay(attempts int, cmd valkey.Completed, err error) time.Duration {
	c := r.lookup(&cmd)
	if c == nil {
		return -1 // no call's Loop can judge it: see lookup
	}
	c.asked.Add(1) // before c.over is read: see unregister
	defer c.asked.Add(-1)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.over.Load():
		return -1
	case r.lookup(&cmd) != c:
		// c ended and its pooled state went to another call between the
		// lookup above and asked: that call's Loop is not this repeat's.
		return -1
	case c.stop != nil:
		return -1
	case attempts == c.round: // a cluster pipeline's other commands of the same round
		return c.wait
	}
	c.round = attempts
	if !c.pipeline {
		err = c.judged(&cmd, err)
	}
	d, stop := c.l.Failed(c.ctx, err)
	for stop == nil {
		if _, terr := c.l.Begin(c.ctx); terr == nil {
			break
		}
		// The Throttle rejected the repeat: it counts as an attempt, and
		// the wait granted after it is waited here, as retry.Do waits it
		// (the context and the time budget bound it), before the next
		// is asked for; valkey-go waits d after.
		if _, stop = c.l.Failed(c.ctx, retry.ErrThrottled); stop == nil {
			stop = c.l.Wait(c.ctx)
		}
	}
	if stop != nil {
		c.stop, d = stop, -1
	}
	c.wait = d
	return d
}

// judged is err, the failure of a repeat of a single command, as the
// call's own loop sees it: a failure without a reply in a *CommandError
// that knows whether an earlier repeat lost its reply; a reply as it is.
func (c *call) judged(cmd *valkey.Completed, err error) error {
	o := classify(err)
	if o == rediscmd.OutcomeReply || o == rediscmd.OutcomeRefused {
		return err
	}
	ce := &CommandError{Command: name(cmd), Err: err, known: rediscmd.Known{Outcome: o, Earlier: c.maybe}}
	c.maybe = c.maybe || o == rediscmd.OutcomeMaybeApplied
	return ce
}
