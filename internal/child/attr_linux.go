package child

import (
	"os"
	"runtime"
	"sync"
	"syscall"
)

// sysProcAttr: a process group of its own (signals reach the command's whole
// tree), and SIGTERM to the command if loanq itself dies (SIGKILL, OOM): a
// command must not outlive the lease or loan that loanq was keeping for it.
// The guard (guard.go) does the same for the rest of the group and follows
// up with SIGKILL; the parent-death signal is the kernel's own part, which
// works even when the guard was killed together with loanq (pkill -9 loanq).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// The kernel sends the parent-death signal when the thread that forked the
// command ends, not the process. Go ends an OS thread when a goroutine that
// locked it returns without unlocking, so a command forked on an arbitrary
// thread could get SIGTERM while loanq runs on. Every command is therefore
// forked on one thread that a goroutine locks and never gives back.
var (
	forkOnce sync.Once
	forks    chan func()
)

// onForkThread runs f (which starts a process) on the dedicated thread.
func onForkThread(f func()) {
	forkOnce.Do(func() {
		forks = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as loanq
			for f := range forks {
				f()
			}
		}()
	})
	done := make(chan struct{})
	forks <- func() { defer close(done); f() }
	<-done
}

// selfExe is the running loanq binary, even if its file was replaced since.
func selfExe() (string, error) {
	if _, err := os.Stat("/proc/self/exe"); err == nil {
		return "/proc/self/exe", nil
	}
	return os.Executable()
}
