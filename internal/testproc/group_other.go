//go:build !unix

package testproc

import (
	"errors"
	"os/exec"
)

// setGroup does nothing here: there are no Unix process groups.
func setGroup(cmd *exec.Cmd) {}

// killGroup kills the process alone: there are no Unix process groups.
func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

// RunAs returns an error here: processes have no Unix credentials (see
// the Unix version).
func RunAs(cmd *exec.Cmd, uid, gid uint32) error {
	return errors.New("testproc: running a process as another user needs Unix")
}
