//go:build !linux

package child

import "syscall"

// sysProcAttr: a process group of its own, so signals reach the command's
// whole tree. (No parent-death signal outside Linux.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
