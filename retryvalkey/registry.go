package retryvalkey

import (
	"sync"
	"unsafe"

	"github.com/valkey-io/valkey-go"
)

// The registry of a retryer's calls, by the address of a registered
// command's first word, which delay reads when valkey-go's loop asks about
// a repeat (it gives the command, not the call). Each word belongs to a
// bucket, by its address, whose mutex guards every registration of it:
// the bucket holds one word itself (the common case: one call in flight
// per bucket, no map), and puts the others in the retryer's map, under
// its mutex too. Calls on different buckets take different locks, and a
// call that succeeds takes its bucket's twice (register, unregister).

// buckets is the number of buckets: a power of 2, more than the calls a
// client usually has in flight (64 bytes each: 8 KiB a client).
const buckets = 128

// bucket holds the registrations of the words of one bucket.
type bucket struct {
	mu   sync.Mutex
	k    *string  // the bucket's own word, or nil
	s    slot     // k's entry
	more int      // the words of this bucket in the retryer's map
	_    [24]byte // to 64 bytes, a cache line: neighbours' locks do not contend
}

// slot is the entry of a command's first word: the call that sends it, or
// nil while several calls send the same (pinned) command at once, which
// delay then cannot tell apart: it does not let valkey-go repeat such a
// command, and each of those calls, marked shared, repeats it itself.
type slot struct {
	c *call
	n int // the calls that registered this command
}

// with returns s with c registered too.
func (s slot) with(c *call) slot {
	if s.n == 0 {
		s.c = c
	} else {
		if s.c != nil {
			s.c.shared.Store(true)
		}
		s.c = nil
		c.shared.Store(true)
	}
	s.n++
	return s
}

// of returns the bucket of the word at k: its address, as a number for
// hashing only, mixed by a Fibonacci hash.
func (r *retryer) of(k *string) *bucket {
	h := uint64(uintptr(unsafe.Pointer(k))>>4) * 0x9E3779B97F4A7C15
	return &r.b[h>>(64-7)]
}

// register makes delay find c from cmd's first word.
func (r *retryer) register(c *call, cmd *valkey.Completed) {
	if w := cmd.Commands(); len(w) > 0 {
		r.add(c, &w[0])
	}
}

// add registers c as a sender of the word at k.
func (r *retryer) add(c *call, k *string) {
	b := r.of(k)
	b.mu.Lock()
	switch {
	case b.k == k:
		b.s = b.s.with(c)
	case b.k == nil && b.more == 0: // k is in neither place
		b.k, b.s = k, slot{c: c, n: 1}
	default:
		r.mu.Lock()
		if r.calls == nil {
			r.calls = make(map[*string]slot)
		}
		s := r.calls[k]
		if s.n == 0 {
			b.more++
		}
		r.calls[k] = s.with(c)
		r.mu.Unlock()
	}
	b.mu.Unlock()
	c.keys = append(c.keys, k)
}

// unregister undoes register for every command of c. The call does so as
// soon as its first send returns: valkey-go then recycles the commands,
// and another call may register the same words.
func (r *retryer) unregister(c *call) {
	if len(c.keys) == 0 {
		return
	}
	for _, k := range c.keys {
		b := r.of(k)
		b.mu.Lock()
		if b.k == k {
			if b.s.n--; b.s.n == 0 {
				b.k, b.s = nil, slot{}
			}
		} else {
			r.mu.Lock()
			if s := r.calls[k]; s.n <= 1 {
				delete(r.calls, k)
				b.more--
			} else {
				s.n--
				r.calls[k] = s
			}
			r.mu.Unlock()
		}
		b.mu.Unlock()
	}
	clear(c.keys)
	c.keys = c.keys[:0]
	// A delay that found c just before, for a command valkey-go recycled
	// and another goroutine sent since, must leave c's Loop alone: one
	// that has not counted itself in asked yet will see over; one that
	// has is waited for (it holds c.mu while it reads over and drives l).
	c.over.Store(true)
	if c.asked.Load() != 0 {
		c.mu.Lock()
		c.mu.Unlock() // an empty critical section: it waits for delay
	}
}

// lookup returns the call that registered cmd, or nil: for a command no
// call registered (the client's own COMMAND in NewClient, a ShareStore
// sync) and for one that several calls registered, whose repeats delay
// cannot attribute to one Loop. Every method through which valkey-go's
// loop repeats a command registers it.
func (r *retryer) lookup(cmd *valkey.Completed) *call {
	if w := cmd.Commands(); len(w) > 0 {
		return r.find(&w[0])
	}
	return nil
}

// find returns the one call that registered the word at k, or nil.
func (r *retryer) find(k *string) *call {
	b := r.of(k)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.k == k {
		return b.s.c
	}
	if b.more == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[k].c
}
