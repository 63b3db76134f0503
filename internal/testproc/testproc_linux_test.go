package testproc

import (
	"os/exec"
	"syscall"
	"testing"
)

// A process started by Start dies with the process that started it, even
// though it leads a group of its own that killing the parent's group would
// not reach.
func TestKilledWithParent(t *testing.T) {
	p, child, alive := startWatched(t, "parent", Start)
	if pgid, err := syscall.Getpgid(child); err != nil || pgid != child {
		t.Fatalf("child's group %d, %v; want its own, %d", pgid, err, child)
	}
	if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if !gone(t, alive) {
		t.Fatal("the child still runs 10s after its parent was killed")
	}
}

// KillWithParent and Prepare keep what SysProcAttr already holds.
func TestPrepareKeepsSysProcAttr(t *testing.T) {
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := RunAs(cmd, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	Prepare(cmd)
	a := cmd.SysProcAttr
	if !a.Setsid || !a.Setpgid || a.Pdeathsig != syscall.SIGKILL || a.Credential == nil ||
		a.Credential.Uid != 65534 || a.Credential.Gid != 65534 || !a.Credential.NoSetGroups {
		t.Fatalf("SysProcAttr after RunAs and Prepare: %+v", a)
	}
	var bare exec.Cmd
	KillWithParent(&bare)
	if bare.SysProcAttr == nil || bare.SysProcAttr.Pdeathsig != syscall.SIGKILL || bare.SysProcAttr.Setpgid {
		t.Fatalf("KillWithParent on a bare command: %+v; want Pdeathsig only", bare.SysProcAttr)
	}
}
