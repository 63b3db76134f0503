package testproc

import (
	"os/exec"
	"syscall"
)

// KillWithParent makes the kernel kill cmd's process when the test process
// that starts it dies (a test binary killed at its timeout, say), so that
// no server outlives the tests. It keeps what cmd.SysProcAttr already
// holds; Go sets it after changing the child's credentials ([RunAs]),
// which would clear it. Call it before cmd.Start. Linux only: elsewhere it
// does nothing.
func KillWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
