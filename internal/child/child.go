// Package child runs the command of `loanq lock run` and `loanq work run`:
// in its own process group, so that a signal loanq passes on reaches the
// whole tree the command started (a shell and its children), and with the
// exit status read the way a shell reports it.
package child

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"

	"github.com/loanq/loanq/problem"
)

// Resolve finds the program before anything is changed in the database, so
// that a typo is bad input (exit 2), not a lease taken for nothing.
func Resolve(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", problem.Usagef("cannot run %q: %v; give the program after -- (e.g. -- /usr/local/bin/job --flag)", name, errors.Unwrap(err))
	}
	return path, nil
}

// Proc is a running command.
type Proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start runs path with args (args[0] is the name it sees) and the extra
// environment variables on top of loanq's own environment.
func Start(path string, args []string, extraEnv []string, stdin io.Reader, stdout, stderr io.Writer) (*Proc, error) {
	cmd := &exec.Cmd{Path: path, Args: args, Env: append(os.Environ(), extraEnv...),
		Stdin: stdin, Stdout: stdout, Stderr: stderr}
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the command has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Signal sends sig to the command's process group (the command and whatever
// it started), or to the command alone if the group is gone.
func (p *Proc) Signal(sig syscall.Signal) {
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Status is the exit status as a shell reports it: the exit code, or 128 plus
// the signal number when a signal ended the command. Only after Done.
func (p *Proc) Status() int {
	<-p.done
	st, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ok && st.Signaled() {
		return 128 + int(st.Signal())
	}
	return p.cmd.ProcessState.ExitCode()
}

// Signaled reports whether a signal ended the command. Only after Done.
func (p *Proc) Signaled() bool {
	<-p.done
	st, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && st.Signaled()
}

// SignalStatus is the exit status a shell gives a process ended by sig.
func SignalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 128 + int(syscall.SIGTERM)
}
