//go:build unix

package testproc

import (
	"os/exec"
	"syscall"
)

func setGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// killGroup kills cmd's process group, whose id is its pid (setGroup).
func killGroup(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// RunAs makes cmd run as the user uid and group gid, without
// supplementary groups; the test process must be allowed to (root). Call
// it before cmd.Start. It keeps what cmd.SysProcAttr already holds. Where
// processes have no Unix credentials (Windows) it returns an error.
func RunAs(cmd *exec.Cmd, uid, gid uint32) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: gid, NoSetGroups: true}
	return nil
}
