package fleet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

func TestKeys(t *testing.T) {
	keys := Keys("app:payments", "budget", 10*time.Second)(1234)
	if len(keys) != slots {
		t.Fatalf("%d keys, want %d", len(keys), slots)
	}
	if keys[0] != "{app:payments}:budget:w10000:1234" || keys[9] != "{app:payments}:budget:w10000:1225" {
		t.Fatalf("keys %q", keys)
	}
}

func TestConfigResolve(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want string // error substring; "" for valid
	}{
		{"defaults", Config{Name: "x", Prefix: "p"}, ""},
		{"empty prefix", Config{Name: "x"}, "prefix must not be empty"},
		{"brace in prefix", Config{Name: "x", Prefix: "}p"}, "must not contain { or }"},
		{"tag in prefix", Config{Name: "x", Prefix: "a{b}"}, "must not contain { or }"},
		{"fast interval", Config{Name: "x", Prefix: "p", Interval: 99 * time.Millisecond}, "below the minimum"},
		{"negative interval", Config{Name: "x", Prefix: "p", Interval: -time.Second}, "below the minimum"},
		{"timeout above interval", Config{Name: "x", Prefix: "p", Timeout: 101 * time.Millisecond}, "at most the interval"},
		{"negative timeout", Config{Name: "x", Prefix: "p", Timeout: -1}, "must be positive"},
		{"slow interval", Config{Name: "x", Prefix: "p", Interval: time.Minute, Timeout: time.Second}, ""},
		{"logger without a handler", Config{Name: "x", Prefix: "p", Logger: &slog.Logger{}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			err := c.resolve()
			if tc.want == "" {
				if err != nil || c.Interval < MinInterval || c.Timeout <= 0 || c.Timeout > c.Interval || c.Logger == nil || c.Logger.Handler() == nil {
					t.Fatalf("resolve() = %v, %+v", err, c)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "x: ") {
				t.Fatalf("resolve() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestStartNil(t *testing.T) {
	cfg := Config{Name: "x", Prefix: "p"}
	if _, err := StartBudget(cfg, nil, &retry.Budget{}); err == nil {
		t.Error("nil store accepted")
	}
	if _, err := StartBudget(cfg, nil, nil); err == nil {
		t.Error("nil budget accepted")
	}
	if _, err := StartThrottle(cfg, nil, nil); err == nil {
		t.Error("nil throttle accepted")
	}
}

// nopStore answers every sync with an error, without a server.
type nopStore struct{}

func (nopStore) Load(context.Context, string) (string, error) { return "", errors.New("down") }
func (nopStore) EvalSHA(context.Context, string, []string, []string) ([]int64, error) {
	return nil, errors.New("down")
}

func TestShareTwice(t *testing.T) {
	cfg := Config{Name: "x", Prefix: "p", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	b := &retry.Budget{}
	e, err := StartBudget(cfg, nopStore{}, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := StartBudget(cfg, nopStore{}, b); err == nil || !strings.Contains(err.Error(), "already shared") {
		t.Fatalf("second share: %v", err)
	}
	e.Close()
	e.Close()
	e2, err := StartBudget(cfg, nopStore{}, b)
	if err != nil {
		t.Fatalf("share after Close: %v", err)
	}
	e2.Close()
	if syncs, failures, _ := e2.Stats(); syncs != 0 || failures < 1 {
		t.Fatalf("stats %d, %d", syncs, failures)
	}
}
