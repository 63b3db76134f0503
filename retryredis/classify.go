package retryredis

import (
	"errors"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
)

// classify says what is known about err, the error of one attempt of a
// command (pipeline false) or of a pipeline or transaction (pipeline
// true). It follows how go-redis reports an attempt:
//   - a dial error (*net.OpError with Op "dial") and a pool timeout come
//     before anything is written;
//   - a write error (*net.OpError with Op "write") of a single command
//     means the server did not receive the whole command, and Redis runs
//     only whole commands; in a pipeline, earlier commands may have been
//     written whole before the failing write, so it may have been applied;
//   - a reply of the server is a redis.Error: the refusals listed in
//     refusal were not run, every other reply says the request is wrong;
//   - everything else (EOF, a reset, a read timeout, a context error while
//     waiting for the reply, an unknown error) happened after the write.
func classify(err error, pipeline bool) outcome {
	if errors.Is(err, redis.ErrClosed) {
		return outcomeFinal
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		if refusal(rerr.Error()) {
			return outcomeRefused
		}
		return outcomeReply
	}
	var op *net.OpError
	if errors.As(err, &op) {
		switch op.Op {
		case "dial":
			return outcomeNotSent
		case "write":
			if !pipeline {
				return outcomeNotSent
			}
		}
	}
	if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) {
		return outcomeNotSent
	}
	return outcomeMaybeApplied
}

// refusal reports whether a server error reply means that the server did
// not run the command and may run it later: a dataset still loading, a
// script or function running too long, a cluster slot in migration or a
// cluster down, a primary unreachable by a replica, a write sent to a
// replica during a failover, too few replicas for a write, or too many
// clients. BUSYKEY and BUSYGROUP, which say the request conflicts with
// existing data, are not refusals.
func refusal(msg string) bool {
	code, _, _ := strings.Cut(msg, " ")
	switch code {
	case "LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "NOREPLICAS":
		return true
	case "ERR":
		return strings.HasPrefix(msg, "ERR max number of clients reached")
	}
	return false
}
