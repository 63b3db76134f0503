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
	signal.Notify(sigs, notIgnored(syscall.SIGINT, syscall.SIGTERM)...)
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

// notIgnored returns the signals of sigs that retry was not started with
// ignored. SIGHUP and SIGINT are left out when they were (nohup, or a
// background job of a shell without job control): notifying them would
// install a handler, so retry would no longer ignore them, and a command it
// starts would no longer inherit the ignored disposition.
func notIgnored(sigs ...os.Signal) []os.Signal {
	out := sigs[:0:0]
	for _, s := range sigs {
		if (s == syscall.SIGHUP || s == syscall.SIGINT) && signal.Ignored(s) {
			continue
		}
		out = append(out, s)
	}
	return out
}
