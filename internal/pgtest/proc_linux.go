package pgtest

import (
	"os/exec"
	"syscall"
)

// killWithParent makes the kernel kill cmd's process when the test process
// that starts it dies (a test binary killed at its timeout, say); the
// server's backends then exit on their own when they see their postmaster
// gone. Go sets it after changing the child's credentials, which would
// clear it.
func killWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
