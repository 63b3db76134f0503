package main

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// cldStopped is the siginfo code of a child stopped by a signal.
const cldStopped = 5

// setSubreaper makes retry the parent of its descendants orphaned while it
// runs (instead of init), so awaitGroup can reap them.
func setSubreaper() { unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// reapGroup reaps every exited child of retry in process group pgid.
func reapGroup(pgid int) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// waitStopped blocks until the child pid stops or exits, and reports
// whether it stopped (consuming that report). An exit is left for
// exec.Cmd.Wait to collect.
func waitStopped(pid int) bool {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || info.Code != cldStopped {
			return false
		}
		unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOHANG, nil)
		return true
	}
}
