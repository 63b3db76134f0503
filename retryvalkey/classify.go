package retryvalkey

import (
	"errors"
	"net"
	"strings"

	"github.com/valkey-io/valkey-go"
)

// classify says what is known about err, the error of a command sent with
// valkey-go: a dial error (*net.OpError with Op "dial") comes before
// anything is written; a *valkey.ValkeyError is a reply (a refusal, or a
// reply saying the request is wrong); ErrClosing means the client is
// closed; everything else may have been applied.
func classify(err error) outcome {
	if ve, ok := valkey.IsValkeyErr(err); ok {
		if refusal(ve.Error()) {
			return outcomeRefused
		}
		return outcomeReply
	}
	if errors.Is(err, valkey.ErrClosing) {
		return outcomeFinal
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return outcomeNotSent
	}
	return outcomeMaybeApplied
}

// refusal reports whether a server error reply means that the server did
// not run the command (see retryredis for the list and why).
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
