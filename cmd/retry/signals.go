package main

import (
	"context"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// interruptible returns a child of ctx that a SIGINT or SIGTERM cancels;
// signalled returns the exit status for the signal that did (exitSIGINT or
// exitSIGTERM), 0 before one; stop ends the watch.
func interruptible(ctx context.Context) (_ context.Context, signalled func() int, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	var code atomic.Int32
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			c := int32(exitSIGINT)
			if s == syscall.SIGTERM {
				c = exitSIGTERM
			}
			code.Store(c)
			cancel()
		case <-done:
		}
	}()
	return ctx, func() int { return int(code.Load()) }, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}
