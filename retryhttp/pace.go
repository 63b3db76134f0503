package retryhttp

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
)

// Pacer holds the requests of a [Transport] to a server that said its
// quota is spent, until the quota resets, instead of sending them to be
// refused with 429. Set one as Transport.Pace; nil (the default) means no
// pacing.
//
// A quota is spent when any response, a 200 too, carries a RateLimit
// field with an item whose r is 0 and which has a t, or a remaining of 0
// with its reset (X-RateLimit-Remaining and X-RateLimit-Reset,
// RateLimit-Remaining and RateLimit-Reset, or a per-dimension pair), read
// as [ParseHint] reads them. Retry-After and the millisecond fields are
// answers about one request and set no hold. From then on, until the
// reset, every attempt to the same host (URL.Host) and partition waits
// before it is sent; a hold longer than the Transport's MaxServerWait is
// not kept (such a server's answers reach the caller), and none is kept
// when MaxServerWait is negative.
//
// Partitions: a server that sends a RateLimit pk (partition key) keeps a
// quota per pk. The Pacer learns which pk the responses to each partition
// of its own carry, and holds that partition's requests only; its own
// partitions are the values of Partition, or one per host.
//
// A held attempt is reported to Policy.Observer as a [retry.EventHeld],
// whose Err is a *[HoldError] ([WaitHint] reads its hint). It is not
// sent, and its call ends with a *HoldError (matching [retry.ErrNotSent]),
// when the hold would end at or after the request's deadline or
// Policy.MaxElapsed, or when the request's context ends during it. A hold
// comes before its attempt begins (before the Throttle is asked, and
// outside Policy.AttemptTimeout); a hedged call's first copy holds inside
// its attempt, and a hedge of it is not sent while the hold lasts (it
// would be released into the quota at the same instant): it ends at once,
// not sent, and no more hedges follow in that burst.
//
// A Pacer is safe for concurrent use and may be shared by Transports
// that reach the same servers. Its zero value is ready to use. It keeps
// at most 4096 partitions' pks and drops holds once they have passed. A
// Transport with a Pacer reads the pacing fields of every response; a
// response without them costs a few map lookups and no allocation.
type Pacer struct {
	// Partition, when set, names the share of a server's quota a request
	// draws on, such as its API key or tenant, for a Transport that
	// serves several: holds are then kept per host and partition. It is
	// called for every request (make it cheap) and must be safe for
	// concurrent use. Nil means one partition per host.
	Partition func(*http.Request) string

	n     atomic.Int32 // len(holds): nothing to look up while zero
	mu    sync.Mutex
	holds map[holdKey]holdEntry
	pks   map[holdKey]string // (host, partition) → the pk its responses carry
}

// Bounds on a Pacer's memory.
const (
	maxPacerPKs   = 4096 // partitions whose pk is remembered; more clears the map
	maxPacerHolds = 1024 // past this, passed holds are swept on each new one
)

// holdKey names a quota: a host and a partition of the Pacer's (pk false)
// or a pk of the server's (pk true).
type holdKey struct {
	host, part string
	pk         bool
}

type holdEntry struct {
	until time.Time
	hint  Hint
}

// HoldError is what a [Pacer] reports about a held request: the Err of
// its [retry.EventHeld], and the error of a request it did not send (then
// wrapped as the last error of a *retry.Error, in the call's error). It
// matches [retry.ErrNotSent] with errors.Is, and the context's error when
// the context ended during the hold.
type HoldError struct {
	Host string        // the request's URL.Host
	Hint Hint          // the response's hint that set the hold
	Wait time.Duration // how long the hold had still to last

	reason string // why the request was not sent; "" for a hold that is waited out
	err    error  // the context's error, when it ended the hold
}

func (e *HoldError) Error() string {
	msg := "retryhttp: requests to " + e.Host + " held " + e.Wait.String() + " (" + e.Hint.String() + ")"
	if e.reason != "" {
		msg = "retryhttp: not sent: " + msg[len("retryhttp: "):] + ", " + e.reason
	}
	if e.err != nil {
		msg += ": " + e.err.Error()
	}
	return msg
}

// Is reports whether target is retry.ErrNotSent, for a request not sent.
func (e *HoldError) Is(target error) bool { return target == retry.ErrNotSent && e.reason != "" }

// Unwrap returns the context's error that ended the hold, or nil.
func (e *HoldError) Unwrap() error { return e.err }

// key returns the quota r draws on. The caller holds p.mu.
func (p *Pacer) key(r *http.Request, part string) holdKey {
	k := holdKey{host: r.URL.Host, part: part}
	if pk, ok := p.pks[k]; ok {
		return holdKey{host: k.host, part: pk, pk: true}
	}
	return k
}

func (p *Pacer) partition(r *http.Request) string {
	if p.Partition != nil {
		return p.Partition(r)
	}
	return ""
}

// held returns how long r must still wait at now, and the hint that set
// the hold.
func (p *Pacer) held(r *http.Request, now time.Time) (time.Duration, Hint) {
	part := p.partition(r)
	p.mu.Lock()
	defer p.mu.Unlock()
	k := p.key(r, part)
	h, ok := p.holds[k]
	if !ok {
		return 0, Hint{}
	}
	d := h.until.Sub(now)
	if d <= 0 {
		delete(p.holds, k)
		p.n.Store(int32(len(p.holds)))
		return 0, Hint{}
	}
	return d, h.hint
}

// learn reads the pacing fields of h, the header of a response to r that
// arrived at now, and holds r's quota if they say it is spent, for at
// most maxWait.
func (p *Pacer) learn(r *http.Request, h http.Header, maxWait time.Duration) {
	if maxWait <= 0 || len(h) == 0 {
		return
	}
	pk, hasPK := "", false
	if v := h[keyRateLimit]; len(v) != 0 {
		if rl, ok := parseRateLimit(v); ok {
			pk, hasPK = rl.pk, rl.pk != ""
			if rl.spent {
				pk, hasPK = rl.spentPK, rl.spentPK != ""
			}
		}
	}
	var hint Hint
	spent := false
	if len(h[keyRateLimit]) != 0 || len(h[keyXRateLimitRemain]) != 0 || len(h[keyRateLimitRemaining]) != 0 || hasDimension(h) {
		hint, spent = readHint(h, time.Now(), true)
	}
	if !hasPK && (!spent || hint.Wait <= 0 || hint.Wait > maxWait) {
		return
	}
	now := time.Now()
	part := p.partition(r)
	p.mu.Lock()
	defer p.mu.Unlock()
	if hasPK {
		own := holdKey{host: r.URL.Host, part: part}
		if old, ok := p.pks[own]; !ok || old != pk {
			if p.pks == nil || len(p.pks) >= maxPacerPKs {
				p.pks = make(map[holdKey]string)
			}
			p.pks[own] = strings.Clone(pk)
		}
	}
	if !spent || hint.Wait <= 0 || hint.Wait > maxWait {
		return
	}
	k := p.key(r, part)
	until := now.Add(hint.Wait)
	if old, ok := p.holds[k]; ok && !old.until.Before(until) {
		return
	}
	if p.holds == nil {
		p.holds = make(map[holdKey]holdEntry)
	}
	if len(p.holds) >= maxPacerHolds {
		for k, e := range p.holds {
			if !e.until.After(now) {
				delete(p.holds, k)
			}
		}
	}
	k.host, k.part = strings.Clone(k.host), strings.Clone(k.part)
	hint.Field, hint.Value = strings.Clone(hint.Field), strings.Clone(hint.Value)
	p.holds[k] = holdEntry{until: until, hint: hint}
	p.n.Store(int32(len(p.holds)))
}

// hasDimension reports whether h has a per-dimension remaining field.
func hasDimension(h http.Header) bool {
	for k := range h {
		if strings.HasPrefix(k, dimRemaining) || strings.HasPrefix(k, anthPrefix) {
			return true
		}
	}
	return false
}

// pace holds attempt n of r while t's Pacer says its quota is spent, and
// reports each hold to the policy's Observer. It returns nil once r may
// be sent, or a *HoldError when the hold would end at or after the
// context's deadline or end (the time MaxElapsed runs out; zero: none), or
// when the context ends during it.
func (t *Transport) pace(ctx context.Context, r *http.Request, n int, end time.Time) error {
	p := t.Pace
	if p == nil {
		return nil
	}
	for p.n.Load() != 0 {
		now := time.Now()
		d, hint := p.held(r, now)
		if d <= 0 {
			return nil
		}
		he := &HoldError{Host: r.URL.Host, Hint: hint, Wait: d}
		if dl, ok := ctx.Deadline(); ok && !now.Add(d).Before(dl) {
			he.reason = "past the request's deadline"
			return he
		}
		if !end.IsZero() && !now.Add(d).Before(end) {
			he.reason = "past Policy.MaxElapsed"
			return he
		}
		if obs := t.Policy.Observer; obs != nil {
			max := t.Policy.MaxAttempts
			if max == 0 {
				max = retry.DefaultMaxAttempts
			}
			obs.Observe(ctx, retry.Event{Kind: retry.EventHeld, Attempt: n, MaxAttempts: max, Err: he, Delay: d})
		}
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			// A new error: an Observer may keep the event's.
			return &HoldError{Host: he.Host, Hint: hint, Wait: d, reason: "the context ended", err: context.Cause(ctx)}
		}
	}
	return nil
}

// learn lets t's Pacer, if any, read the response resp to r.
func (t *Transport) learn(r *http.Request, resp *http.Response) {
	if t.Pace != nil && resp != nil {
		t.Pace.learn(r, resp.Header, t.maxServerWait())
	}
}
