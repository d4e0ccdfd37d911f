//go:build windows

package child

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// Windows has no POSIX process groups, signals to a group, exec that keeps
// the pid, nor inherited descriptors beyond the standard three, which the
// guard and the gate (guard.go, gate.go) are built on: a command loanq
// started could outlive loanq and the lease or loan it kept for it. So the
// commands that run other programs (`lock run`, `work run`) refuse on
// Windows; every other command works (docs/install.md).
var errUnsupported = errors.New("running a command (`loanq lock run`, `loanq work run`) is not supported on Windows: " +
	"loanq stops a command's whole process tree through POSIX process groups, which Windows lacks; run these commands on Linux or macOS (docs/install.md)")

// gateEnv is gate.go's (not built here); Start refuses before using it.
const gateEnv = "LOANQ_INTERNAL_CHILD_EXEC"

func supported() error { return errUnsupported }

func sysProcAttr() *syscall.SysProcAttr { return nil }

func onForkThread(f func()) { f() }

func selfExe() (string, error) { return os.Executable() }

// killGroup kills the process alone: Windows has no process groups to signal.
func killGroup(pid int, _ syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// guardian: nothing to guard, as Start refuses first.
type guardian struct{}

var guard guardian

func (guardian) watch(int, time.Duration) error { return errUnsupported }
func (guardian) forget(int)                     {}
