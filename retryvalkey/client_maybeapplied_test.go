package retryvalkey_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/faultproxy"
	"github.com/retrykit/retry/internal/redistest"
)

// refuseLoseRefuse returns a client through a fault proxy in front of srv
// whose policy makes exactly three sends of a call: the first is refused
// (NOREPLICAS: min-replicas-to-write 1 with no replica), the second is
// applied by the server and loses its reply (the proxy resets the
// connection after forwarding a command named lost), the third is refused
// again, or, when third is not nil, accepted after third ran.
func refuseLoseRefuse(t *testing.T, lost string, third func(*redistest.Server)) (*redistest.Server, valkey.Client) {
	t.Helper()
	srv := redistest.Start(t)
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{})
	refuse := func(on bool) {
		n := "0"
		if on {
			n = "1"
		}
		if _, err := srv.Do("CONFIG", "SET", "min-replicas-to-write", n); err != nil {
			t.Error(err)
		}
	}
	obs := retry.ObserverFunc(func(ctx context.Context, e retry.Event) {
		if e.Kind != retry.EventAttempt {
			return
		}
		switch e.Attempt {
		case 2: // applied, reply lost
			refuse(false)
			px.SetConfig(faultproxy.Config{ResetAfter: 1, Match: only(lost)})
		case 3: // refused again
			px.SetConfig(faultproxy.Config{})
			if third != nil {
				third(srv)
			} else {
				refuse(true)
			}
		}
	})
	c := newClient(t, px.Addr(), retry.Policy{Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxAttempts: 3, Observer: obs})
	refuse(true)
	return srv, c
}

// TestRefusalAfterLostReply: a call whose second send was applied but
// lost its reply, and whose last send was refused, must not come back as a
// bare refusal ("the server refused the command without running it"): the
// README says "a call counts its earlier attempts, so once one lost its
// reply the error matches retry.ErrMaybeApplied whatever the later ones met".
func TestRefusalAfterLostReply(t *testing.T) {
	srv, c := refuseLoseRefuse(t, "set", nil)
	err := c.Do(context.Background(), c.B().Set().Key("k").Value("v").Build()).Error()
	if v, _ := srv.Do("GET", "k"); v != "v" {
		t.Fatalf("k = %q; the second send was meant to be applied (err %v)", v, err)
	}
	if !errors.Is(err, retry.ErrMaybeApplied) || errors.Is(err, retry.ErrNotSent) {
		t.Fatalf("SET refused, applied with its reply lost, refused: %v (%T); want an error matching retry.ErrMaybeApplied", err, err)
	}
	var ve *valkey.ValkeyError
	if !errors.As(err, &ve) || !strings.HasPrefix(ve.Error(), "NOREPLICAS") {
		t.Fatalf("SET: %v; want the last NOREPLICAS reply reachable with errors.As", err)
	}
}

// TestRefusalAfterLostReplyPipeline: the same for a pipeline of
// safe commands, whose refused tail is sent again.
func TestRefusalAfterLostReplyPipeline(t *testing.T) {
	srv, c := refuseLoseRefuse(t, "set", nil)
	r := c.DoMulti(context.Background(),
		c.B().Set().Key("a").Value("1").Build(),
		c.B().Set().Key("b").Value("2").Build())
	if v, _ := srv.Do("GET", "a"); v != "1" {
		t.Fatalf("a = %q; the second send was meant to apply SET a (errors %v, %v)", v, r[0].Error(), r[1].Error())
	}
	for i, x := range r {
		if err := x.Error(); !errors.Is(err, retry.ErrMaybeApplied) {
			t.Errorf("pipeline command %d refused, sent with its reply lost, refused: %v (%T); want an error matching retry.ErrMaybeApplied", i, err, err)
		}
	}
}

// TestReplyAfterLostReply: the same when the last send meets an error
// reply (WRONGTYPE: the key became a string meanwhile) rather than a
// refusal.
func TestReplyAfterLostReply(t *testing.T) {
	var applied string
	_, c := refuseLoseRefuse(t, "hset", func(srv *redistest.Server) {
		applied, _ = srv.Do("HGET", "s", "f")
		if _, err := srv.Do("SET", "s", "string"); err != nil {
			t.Error(err)
		}
	})
	err := c.Do(context.Background(), c.B().Hset().Key("s").FieldValue().FieldValue("f", "v").Build()).Error()
	if applied != "v" {
		t.Fatalf("HGET s f before the third send = %q; the second send was meant to be applied (err %v)", applied, err)
	}
	if !errors.Is(err, retry.ErrMaybeApplied) {
		t.Fatalf("HSET refused, applied with its reply lost, answered WRONGTYPE: %v (%T); want an error matching retry.ErrMaybeApplied", err, err)
	}
	var ve *valkey.ValkeyError
	if !errors.As(err, &ve) || !strings.HasPrefix(ve.Error(), "WRONGTYPE") || !strings.Contains(err.Error(), "then answered") {
		t.Fatalf("HSET: %v; want the WRONGTYPE reply, reachable with errors.As, after \"then answered\"", err)
	}
}
