//go:build !linux

package pgtest

import "os/exec"

// killWithParent does nothing here: only Linux can kill a child with its
// parent (see the Linux version).
func killWithParent(cmd *exec.Cmd) {}
