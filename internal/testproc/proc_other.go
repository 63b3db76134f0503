//go:build !linux

package testproc

import "os/exec"

// KillWithParent does nothing here: only Linux can kill a child with its
// parent (see the Linux version).
func KillWithParent(cmd *exec.Cmd) {}
