//go:build !unix

package main

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// jobControl without Unix process groups: signals reach the direct child only.
type jobControl struct{}

func newJobControl() *jobControl                { return &jobControl{} }
func (j *jobControl) close()                    {}
func (j *jobControl) prepare(*exec.Cmd)         {}
func (j *jobControl) wait(c *exec.Cmd) error    { return c.Wait() }
func (j *jobControl) awaitGroup(int, time.Time) {}

func (j *jobControl) signal(pid int, sig syscall.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		if sig == syscall.SIGKILL {
			p.Kill()
		} else {
			p.Signal(sig)
		}
	}
}
