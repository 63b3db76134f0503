package retryshare_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/retryshare"
)

// downStore is a Store whose server never answers: every call fails.
type downStore struct{}

func (downStore) Load(context.Context, string) (string, error) {
	return "", errors.New("down")
}

func (downStore) EvalSHA(context.Context, string, []string, []string) ([]int64, error) {
	return nil, errors.New("down")
}

// TestArguments: each bad argument is an error naming it, with the
// package's prefix, and nothing starts.
func TestArguments(t *testing.T) {
	var b retry.Budget
	var th retry.Throttle
	for _, tc := range []struct {
		name string
		f    func() (*retryshare.Share, error)
		want string
	}{
		{"nil store", func() (*retryshare.Share, error) { return retryshare.Budget(nil, "p", &b) }, "nil Store"},
		{"nil store throttle", func() (*retryshare.Share, error) { return retryshare.Throttle(nil, "p", &th) }, "nil Store"},
		{"nil budget", func() (*retryshare.Share, error) { return retryshare.Budget(downStore{}, "p", nil) }, "nil *retry.Budget"},
		{"nil throttle", func() (*retryshare.Share, error) { return retryshare.Throttle(downStore{}, "p", nil) }, "nil *retry.Throttle"},
		{"empty prefix", func() (*retryshare.Share, error) { return retryshare.Budget(downStore{}, "", &b) }, "prefix must not be empty"},
		{"brace", func() (*retryshare.Share, error) { return retryshare.Budget(downStore{}, "a{b", &b) }, "must not contain { or }"},
		{"short interval", func() (*retryshare.Share, error) {
			return retryshare.Budget(downStore{}, "p", &b, retryshare.WithSyncInterval(50*time.Millisecond))
		}, "sync interval 50ms is below the minimum"},
		{"long timeout", func() (*retryshare.Share, error) {
			return retryshare.Budget(downStore{}, "p", &b, retryshare.WithSyncTimeout(time.Second))
		}, "sync timeout 1s must be positive and at most the interval"},
	} {
		s, err := tc.f()
		if s != nil || err == nil || !strings.HasPrefix(err.Error(), "retryshare: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, %v; want a retryshare: error containing %q", tc.name, s, err, tc.want)
		}
	}
}

// TestServerDown: a Share whose server does not answer leaves the Budget
// local, counts its failed syncs, and Close stops it.
func TestServerDown(t *testing.T) {
	b, err := retry.NewBudget(retry.BudgetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := retryshare.Budget(downStore{}, "p", b, retryshare.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for s.Stats().Failures == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := s.Stats(); st.Failures == 0 || st.Syncs != 0 || s.Shared() {
		t.Errorf("Stats %+v, Shared %v; want failed syncs only, not shared", st, s.Shared())
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if !account.AllowRetry(b) {
		t.Error("a local Budget with its floor refused its first retry")
	}
}
