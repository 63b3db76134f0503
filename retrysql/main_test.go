package retrysql_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/retrykit/retry/internal/pgtest"
)

// TestMain runs the tests against one postgres, started by the first test
// that needs it (each test makes a database of its own): deadlock_timeout
// 100 ms as in the workload, every statement logged to count at
// the server.
// goleak checks, once they have all run, that they left no goroutine
// behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(withPG{m})
}

type withPG struct{ m *testing.M }

func (w withPG) Run() int {
	return pgtest.Main(w.m, "deadlock_timeout=100ms", "log_statement=all", "log_min_messages=warning",
		"log_min_error_statement=panic", "log_line_prefix=")
}
