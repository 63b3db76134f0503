package retryvalkey

import (
	"errors"
	"net"

	"github.com/valkey-io/valkey-go"

	"github.com/retrykit/retry/internal/rediscmd"
)

// classify says what is known about err, the error of a command sent with
// valkey-go: a dial error (*net.OpError with Op "dial") comes before
// anything is written; a *valkey.ValkeyError is a reply (a refusal, or a
// reply saying the request is wrong); ErrClosing means the client is
// closed (rediscmd.OutcomeFinal: not sent when the client was closed before the
// call, else it may have been applied, see client.final); everything else
// may have been applied.
func classify(err error) rediscmd.Outcome {
	if ve, ok := valkey.IsValkeyErr(err); ok {
		if rediscmd.Refusal(ve.Error()) {
			return rediscmd.OutcomeRefused
		}
		return rediscmd.OutcomeReply
	}
	if errors.Is(err, valkey.ErrClosing) {
		return rediscmd.OutcomeFinal
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return rediscmd.OutcomeNotSent
	}
	return rediscmd.OutcomeMaybeApplied
}
