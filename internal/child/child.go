// Package child runs the command of `loanq lock run` and `loanq work run`:
// in its own process group, so that a signal loanq passes on reaches the
// whole tree the command started (a shell and its children); stopped with
// that tree when loanq dies (the guard, guard.go, and on Linux the
// parent-death signal); with an environment that holds none of loanq's
// secrets (Environ); and with the exit status read the way a shell reports it.
package child

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

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

// Environ is the environment of a command loanq runs: the caller's (base,
// os.Environ()) without loanq's own variables, plus the variables the
// command's contract names (vars, "NAME=value"). Removed: every LOANQ_*
// variable (LOANQ_DB may hold a password, LOANQ_SERVE_TOKEN is a token; the
// contract's own are set from vars), DATABASE_URL when it holds the DSN
// loanq uses (dsnInUse): it is loanq's secret then, and the variables loanq's
// database client reads its password from (passwordEnv, drivers.PasswordEnv:
// PGPASSWORD when loanq connects to PostgreSQL). A DATABASE_URL that names
// another database, or a PGPASSWORD when loanq's database is not PostgreSQL,
// is the command's own business and stays.
func Environ(base []string, dsnInUse string, passwordEnv []string, vars ...string) []string {
	env := make([]string, 0, len(base)+len(vars))
	for _, kv := range base {
		name, value, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "LOANQ_") || (name == "DATABASE_URL" && value == dsnInUse) || slices.Contains(passwordEnv, name) {
			continue
		}
		env = append(env, kv)
	}
	return append(env, vars...)
}

// Start runs path with args (args[0] is the name it sees) and exactly the
// environment env (see Environ). If loanq dies while the command runs, the
// command's process group gets SIGTERM and, killAfter later, SIGKILL.
//
// The command must not run before the guard watches its process group:
// killed in between, loanq would leave it running unwatched. So loanq first
// starts itself as a gate (gate.go) in the command's process group, with its
// pid; once the group is registered with the guard, the gate replaces itself
// with the command (exec: same pid and group). If loanq dies before that,
// the gate runs nothing.
func Start(path string, args, env []string, killAfter time.Duration, stdin io.Reader, stdout, stderr io.Writer) (*Proc, error) {
	if err := supported(); err != nil {
		return nil, err
	}
	exe, err := selfExe()
	if err != nil {
		return nil, err
	}
	gateR, gateW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer gateW.Close()
	cmd := &exec.Cmd{Path: exe, Args: append([]string{"loanq-exec", path}, args...), Env: append(env[:len(env):len(env)], gateEnv+"=1"),
		Stdin: stdin, Stdout: stdout, Stderr: stderr, ExtraFiles: []*os.File{gateR}}
	cmd.SysProcAttr = sysProcAttr()
	onForkThread(func() { err = cmd.Start() })
	gateR.Close()
	if err != nil {
		return nil, err
	}
	pgid := cmd.Process.Pid // Setpgid: the command leads its own group
	if err := guard.watch(pgid, killAfter); err != nil {
		gateW.Close() // the gate exits without running the command
		_ = cmd.Wait()
		return nil, fmt.Errorf("cannot start the guard that stops the command if loanq dies: %w", err)
	}
	if _, err := gateW.Write([]byte{1}); err != nil {
		guard.forget(pgid)
		_ = killGroup(pgid, syscall.SIGKILL)
		_ = cmd.Wait()
		return nil, fmt.Errorf("starting the command: %w", err)
	}
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		guard.forget(pgid)
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the command has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Signal sends sig to the command's process group (the command and whatever
// it started), or to the command alone if the group is gone.
func (p *Proc) Signal(sig syscall.Signal) {
	if err := killGroup(p.cmd.Process.Pid, sig); err != nil {
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
