package retryshare_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any of them leaves a goroutine
// running (a Share's goroutine ends soon after Close).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
