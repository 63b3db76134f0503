package retryvalkey

import (
	"context"
	"errors"
	"testing"

	"github.com/valkey-io/valkey-go"

	"github.com/retrykit/retry"
)

// TestWrapAfterLostReply: in a pipeline's tail sent again after a send
// lost its reply, an error reply comes back wrapped, matching
// retry.ErrMaybeApplied, but a nil reply (GET of a missing key) is an answer
// and comes back as valkey-go gives it. The replies are a real server's.
func TestWrapAfterLostReply(t *testing.T) {
	c := bareClient(t)
	ctx := context.Background()
	if err := c.Do(ctx, c.B().Set().Key("s").Value("string").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	nilReply := c.Do(ctx, c.B().Get().Key("missing").Build())
	if !valkey.IsValkeyNil(nilReply.Error()) {
		t.Fatalf("GET missing: %v", nilReply.Error())
	}
	if err := wrap(nilReply, "GET", false, true).Error(); !valkey.IsValkeyNil(err) {
		t.Errorf("nil reply after a lost reply: %v (%T), want valkey.Nil", err, err)
	}
	wrongType := c.Do(ctx, c.B().Hget().Key("s").Field("f").Build())
	err := wrap(wrongType, "HGET", false, true).Error()
	var ve *valkey.ValkeyError
	if !errors.Is(err, retry.ErrMaybeApplied) || !errors.As(err, &ve) {
		t.Errorf("error reply after a lost reply: %v (%T), want a *CommandError matching retry.ErrMaybeApplied around the reply", err, err)
	}
	if err := wrap(wrongType, "HGET", false, false).Error(); !isReply(err) {
		t.Errorf("error reply with no lost reply before it: %v (%T), want it as valkey-go gives it", err, err)
	}
}

// isReply reports whether err is a server reply as valkey-go gives it.
func isReply(err error) bool {
	_, ok := err.(*valkey.ValkeyError)
	return ok
}
