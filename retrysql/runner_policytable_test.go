package retrysql_test

import (
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/policytable"
	"github.com/retrykit/retry/retrysql"
)

// TestPolicyTable: New refuses exactly the Policy fields that the table in
// docs/engine.md says retrysql refuses, naming them. It refuses none, so
// New must also accept each field's sample without any error. New needs
// no server.
func TestPolicyTable(t *testing.T) {
	policytable.Test(t, "../docs/engine.md", "retrysql", "retrysql", func(p retry.Policy) error {
		_, err := retrysql.New(p)
		if err != nil {
			t.Errorf("New refused a valid Policy: %v", err)
		}
		return err
	})
}
