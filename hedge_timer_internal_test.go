package retry

import (
	"context"
	"testing"
	"time"
)

// A hedge timer that fired while its call held the lock, and was then
// disarmed and armed again, runs a callback that must do nothing: the
// hedge is the new timer's to send, once it fires. The call's state is
// not given back to the pool while such a callback is still to come.
func TestHedgeStaleTimerCallbackDoesNothing(t *testing.T) {
	short, err := NewHedger(HedgeConfig{FixedDelay: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	long, err := NewHedger(HedgeConfig{FixedDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var sent int
	c := getCall[struct{}](t.Context(), &Policy{}, short, nil, func(context.Context) error { sent++; return nil })
	c.copies = append(c.inline[:0], copyState{n: 1, cancel: func() {}})
	c.sent = 1

	c.mu.Lock()
	// Arm until the timer fires while the lock is held (its callback then
	// waits for c.mu): a few tries on a busy machine.
	for try := 0; c.stale == 0; try++ {
		if try == 100 {
			c.mu.Unlock()
			t.Fatal("the 1 µs hedge timer never fired within 100 × 20 ms")
		}
		c.arm()
		time.Sleep(20 * time.Millisecond)
		c.disarm()
	}
	c.h = long
	c.arm() // the new timer: the hedge is due in an hour
	c.pending = c.stale != 0 || c.timer != nil
	c.mu.Unlock()

	deadline := time.Now().Add(time.Second)
	for {
		c.mu.Lock()
		stale, n, armed := c.stale, c.sent, c.timer != nil
		c.mu.Unlock()
		if stale == 0 {
			if n != 1 || !armed {
				t.Fatalf("after the stale callback: %d attempts sent, timer armed %v; want 1, true", n, armed)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stale callback did not run within 1 s")
		}
		time.Sleep(time.Millisecond)
	}
	c.mu.Lock()
	c.disarm()
	c.mu.Unlock()
	if sent != 0 {
		t.Errorf("the operation ran %d times, want 0", sent)
	}
	// A call whose last burst ended with a callback to come is not pooled.
	c.pending = true
	c.release()
	if c.h == nil {
		t.Error("a call with a timer callback to come was reset and pooled")
	}
}
