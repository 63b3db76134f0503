package redistest

import (
	"os/exec"
	"syscall"
)

// KillWithParent makes the kernel kill cmd's process when the test process
// that starts it dies (a test binary killed at its timeout, say), so that
// no server outlives the tests. Call it before cmd.Start.
func KillWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
