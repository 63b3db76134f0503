package redistest

import (
	"os/exec"

	"github.com/retrykit/retry/internal/testproc"
)

// KillWithParent makes the kernel kill cmd's process when the test process
// that starts it dies (a test binary killed at its timeout, say), so that
// no server outlives the tests. Call it before cmd.Start. Linux only:
// elsewhere it does nothing. It is [testproc.KillWithParent], for the
// tests that start their own redis-server or worker processes.
func KillWithParent(cmd *exec.Cmd) { testproc.KillWithParent(cmd) }
