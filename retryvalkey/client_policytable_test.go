package retryvalkey_test

import (
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/policytable"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retryvalkey"
)

// TestPolicyTable: NewClient refuses exactly the Policy fields that the
// table in docs/engine.md says retryvalkey refuses, naming them.
func TestPolicyTable(t *testing.T) {
	srv := redistest.Start(t)
	for _, err := range policytable.Check("../docs/engine.md", "retryvalkey", "retryvalkey", func(p retry.Policy) error {
		c, err := retryvalkey.NewClient(t.Context(), option(srv.Addr()), p)
		if err == nil {
			c.Close()
		}
		return err
	}) {
		t.Error(err)
	}
}
