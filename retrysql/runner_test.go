package retrysql_test

import (
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrysql"
)

// TestNew: an invalid policy or isolation level is an error naming it.
func TestNew(t *testing.T) {
	if _, err := retrysql.New(retry.Policy{MaxAttempts: -2}); !errors.Is(err, retry.ErrInvalidPolicy) || !strings.Contains(err.Error(), "MaxAttempts") {
		t.Errorf("MaxAttempts -2: err = %v; want an invalid policy naming MaxAttempts", err)
	}
	if _, err := retrysql.New(retry.Policy{}, retrysql.WithIsolation(sql.LevelLinearizable)); err == nil || !strings.Contains(err.Error(), "WithIsolation") {
		t.Errorf("LevelLinearizable: err = %v; want an error naming WithIsolation", err)
	}
	if _, err := retrysql.New(retry.Policy{}, retrysql.WithIsolation(sql.LevelSerializable), retrysql.WithReadOnly()); err != nil {
		t.Errorf("serializable read-only: %v", err)
	}
}
