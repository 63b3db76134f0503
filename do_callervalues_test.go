package retry_test

// Odd values from the caller's code that the loop survives without a panic:
// a typed-nil *retry.Error from op, a Logger without a handler, a context
// whose error == cannot compare.

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/retrykit/retry"
)

// An operation that returns a typed-nil *retry.Error (the classic
// "var e *retry.Error; return e" mistake, e.g. from a helper that returns
// the result of an inner Do through a concrete type) makes Do panic with a
// nil dereference inside the loop's error classification (walk -> Unwrap).
// Mission: never a panic on bad input; doc.go: Do returns an *Error that
// wraps the last attempt's error.
func TestTypedNilErrorFromOpDoesNotPanic(t *testing.T) {
	var panicked any
	func() {
		defer func() { panicked = recover() }()
		p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3}
		retry.Do(context.Background(), p, func(context.Context) error {
			var e *retry.Error
			return e // non-nil error interface holding a nil *Error
		})
	}()
	if panicked != nil {
		t.Fatalf("Do panicked on an op returning a typed-nil *retry.Error: %v", panicked)
	}
}

// Policy.Logger set to a Logger without a handler (&slog.Logger{}) makes
// the loop panic at the first retry (Logger.Enabled on a nil Handler).
// Validate accepts the policy. Mission: never a panic on bad input;
// Validate names what is wrong.
func TestLoggerWithoutHandlerDoesNotPanic(t *testing.T) {
	p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 2, Logger: &slog.Logger{}}
	verr := p.Validate()
	var panicked any
	func() {
		defer func() { panicked = recover() }()
		retry.Do(context.Background(), p, func(context.Context) error { return errors.New("x") })
	}()
	if panicked != nil {
		t.Fatalf("Validate() = %v, then Do panicked: %v", verr, panicked)
	}
}

// sliceError is an error of a type that == cannot compare.
type sliceError []string

func (e sliceError) Error() string { return "slice error" }

// endedContext is a Context that has ended with err.
type endedContext struct {
	context.Context
	err error
}

func (c endedContext) Err() error { return c.err }

func (c endedContext) Done() <-chan struct{} {
	done := make(chan struct{})
	close(done)
	return done
}

// errors.Is never panics: a *retry.Error whose Cause (the context's error)
// is of a type that == cannot compare, matched against a target of that
// type, compared them with == and panicked ("comparing uncomparable
// type").
func TestErrorIsUncomparableCause(t *testing.T) {
	ctx := endedContext{context.Background(), sliceError{"ended"}}
	err := retry.Do(ctx, retry.Policy{}, func(context.Context) error { return nil })
	var re *retry.Error
	if !errors.As(err, &re) || re.Cause == nil {
		t.Fatalf("err %v, want a *retry.Error with the context's error as Cause", err)
	}
	if errors.Is(err, sliceError{"other"}) {
		t.Error("matched an error that is not the cause")
	}
}
