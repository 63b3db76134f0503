package retrygax_test

import (
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/policytable"
	"github.com/retrykit/retry/retrygax"
)

// TestPolicyTable: WithPolicy refuses exactly the Policy fields that the
// table in docs/engine.md says retrygax refuses, naming them.
func TestPolicyTable(t *testing.T) {
	policytable.Test(t, "../docs/engine.md", "retrygax", "retrygax", func(p retry.Policy) error {
		_, err := retrygax.WithPolicy(p)
		return err
	})
}
