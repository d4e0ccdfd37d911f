package child

import "syscall"

// sysProcAttr: a process group of its own (signals reach the command's whole
// tree), and SIGTERM to the command if loanq itself dies (SIGKILL, OOM): a
// command must not outlive the lease or loan that loanq was keeping for it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
