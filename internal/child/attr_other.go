//go:build !linux && !windows

package child

import (
	"os"
	"syscall"
)

// sysProcAttr: a process group of its own, so signals reach the command's
// whole tree. (No parent-death signal outside Linux: the guard, guard.go,
// alone stops the commands when loanq dies.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// onForkThread runs f: without a parent-death signal any thread may fork.
func onForkThread(f func()) { f() }

func selfExe() (string, error) { return os.Executable() }
