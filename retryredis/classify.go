package retryredis

import (
	"errors"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/internal/rediscmd"
)

// classify says what is known about err, the error of one attempt of a
// command (pipeline false) or of a pipeline or transaction (pipeline
// true). It follows how go-redis reports an attempt:
//   - a dial error (*net.OpError with Op "dial"), a pool timeout and a
//     transport failure of the connection's setup (HELLO, CLIENT SETINFO,
//     ..., marked by markSetup) come before anything is written;
//   - a write error (*net.OpError with Op "write") of a single command
//     means the server did not receive the whole command, and Redis runs
//     only whole commands; in a pipeline, earlier commands may have been
//     written whole before the failing write, so it may have been applied;
//   - a reply of the server is a redis.Error: the refusals of
//     rediscmd.Refusal were not run, every other reply says the request is
//     wrong;
//   - everything else (EOF, a reset, a read timeout, a context error while
//     waiting for the reply, an unknown error) happened after the write.
func classify(err error, pipeline bool) rediscmd.Outcome {
	if errors.Is(err, redis.ErrClosed) {
		return rediscmd.OutcomeFinal
	}
	var setup *setupError
	if errors.As(err, &setup) {
		return rediscmd.OutcomeNotSent
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		if rediscmd.Refusal(rerr.Error()) {
			return rediscmd.OutcomeRefused
		}
		return rediscmd.OutcomeReply
	}
	var op *net.OpError
	if errors.As(err, &op) {
		switch op.Op {
		case "dial":
			return rediscmd.OutcomeNotSent
		case "write":
			if !pipeline {
				return rediscmd.OutcomeNotSent
			}
		}
	}
	if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) {
		return rediscmd.OutcomeNotSent
	}
	return rediscmd.OutcomeMaybeApplied
}
