//go:build unix

package main

import (
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// jobControl starts each attempt's command in a process group of its own,
// so that --attempt-timeout and forwarded signals reach everything the
// command started (its whole process group), not only the direct child.
//
// When retry runs in the foreground of its controlling terminal, the
// command's group is made the terminal's foreground group for the attempt
// (as a shell does), so the command reads the terminal and gets Ctrl-C,
// Ctrl-\ and Ctrl-Z from it directly; retry takes the terminal back when
// the attempt ends. Otherwise the group stays in the background and retry
// forwards SIGINT, SIGTERM and SIGHUP it receives to the whole group.
//
// A jobControl is used by one goroutine at a time.
type jobControl struct {
	tty *os.File // the controlling terminal, when retry is in its foreground group; nil otherwise
}

// newJobControl looks at retry's terminal, and on Linux makes retry the
// subreaper of its descendants, so that a timed-out command's orphaned
// grandchildren can be waited for.
func newJobControl() *jobControl {
	setSubreaper()
	j := &jobControl{}
	f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return j // no controlling terminal
	}
	pg, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	if err != nil || pg != syscall.Getpgrp() {
		f.Close() // retry is in the background: leave the terminal alone
		return j
	}
	j.tty = f
	return j
}

func (j *jobControl) close() {
	if j.tty != nil {
		j.tty.Close()
	}
}

// prepare sets c up to start in a new process group (in the terminal's
// foreground when retry owns the terminal).
func (j *jobControl) prepare(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if j.tty != nil {
		c.SysProcAttr.Foreground = true
		c.SysProcAttr.Ctty = int(j.tty.Fd())
	}
}

// signal sends sig to the process group led by pid (the command started
// through prepare), and SIGCONT after it, so that a stopped group gets it.
func (j *jobControl) signal(pid int, sig syscall.Signal) {
	syscall.Kill(-pid, sig)
	if sig != syscall.SIGKILL && sig != syscall.SIGCONT {
		syscall.Kill(-pid, syscall.SIGCONT)
	}
}

// reclaim makes retry's own group the terminal's foreground group again,
// after an attempt ended (retry may be in the background then, where
// tcsetpgrp would stop it with SIGTTOU: it is ignored for the call).
func (j *jobControl) reclaim() {
	if j.tty == nil {
		return
	}
	signal.Ignore(syscall.SIGTTOU)
	unix.IoctlSetPointerInt(int(j.tty.Fd()), unix.TIOCSPGRP, syscall.Getpgrp())
	signal.Reset(syscall.SIGTTOU)
}

// handOver gives the terminal to the group pid again, after retry was
// continued from a stop, if retry is in the foreground then.
func (j *jobControl) handOver(pid int) {
	if j.tty == nil {
		return
	}
	if pg, err := unix.IoctlGetInt(int(j.tty.Fd()), unix.TIOCGPGRP); err == nil && pg == syscall.Getpgrp() {
		unix.IoctlSetPointerInt(int(j.tty.Fd()), unix.TIOCSPGRP, pid)
	}
}

// wait waits for c to exit. When the command's group is stopped from the
// terminal (Ctrl-Z) while it has the terminal, retry takes the terminal
// back and stops its own group too, so the shell sees the job stopped; when
// continued (fg), it gives the terminal back and continues the command.
func (j *jobControl) wait(c *exec.Cmd) error {
	if j.tty != nil {
		for waitStopped(c.Process.Pid) {
			j.reclaim()
			syscall.Kill(0, syscall.SIGTSTP) // stop retry's own group, as the terminal would have
			j.handOver(c.Process.Pid)
			syscall.Kill(-c.Process.Pid, syscall.SIGCONT)
		}
	}
	err := c.Wait()
	j.reclaim()
	return err
}

// awaitGroup waits, after the group's leader pid has exited, until no
// process of the group is left, reaping those that became retry's children.
// At kill it sends SIGKILL to whatever is left; it gives up waiting one
// second after that (a process that ignores SIGKILL cannot exist, but one
// reparented elsewhere can stay a zombie).
func (j *jobControl) awaitGroup(pid int, kill time.Time) {
	killed := false
	for {
		reapGroup(pid)
		if err := syscall.Kill(-pid, 0); err == syscall.ESRCH {
			return
		}
		now := time.Now()
		switch {
		case !killed && !now.Before(kill):
			syscall.Kill(-pid, syscall.SIGKILL)
			killed = true
		case killed && now.After(kill.Add(time.Second)):
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
