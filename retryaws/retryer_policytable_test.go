package retryaws_test

import (
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/policytable"
	"github.com/retrykit/retry/retryaws"
)

// TestPolicyTable: New refuses exactly the Policy fields that the table in
// docs/engine.md says retryaws refuses, naming them.
func TestPolicyTable(t *testing.T) {
	policytable.Test(t, "../docs/engine.md", "retryaws", "retryaws", func(p retry.Policy) error {
		_, err := retryaws.New(p)
		return err
	})
}
