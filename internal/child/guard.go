//go:build !windows

package child

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The guard: a small process loanq starts (itself, re-executed) once it runs
// a command. loanq tells it the process group of every command it runs,
// through a pipe. When loanq ends in any way, SIGKILL included, the kernel
// closes the pipe; the guard then sends SIGTERM to every group still
// registered and SIGKILL to those still alive after their delay. That stops
// the command's own children too (a shell's `sleep`, which the parent-death
// signal never reaches) and a command that ignores SIGTERM, so a command
// cannot go on beside the next holder of its lease or loan.
//
// Protocol, one line each: "+PGID KILL_AFTER_MS" (watch), "-PGID" (the
// command ended: forget it).

// guardEnv marks the process loanq starts as its guard. Checked in init, so
// every binary that runs commands through this package (loanq, and the test
// binaries) can be its own guard.
const guardEnv = "LOANQ_INTERNAL_CHILD_GUARD"

func init() {
	switch {
	case os.Getenv(guardEnv) == "1":
		runGuard(os.Stdin)
		os.Exit(0)
	case os.Getenv(gateEnv) == "1":
		runGate()
	}
}

// runGuard is the guard process: it reads the registrations until loanq's
// end closes the pipe, then stops what is still registered.
func runGuard(in io.Reader) {
	// The guard ends when loanq does (the pipe closes), not by the signals a
	// terminal or a `kill` of loanq's process group sends.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	groups := map[int]time.Duration{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		f := strings.Fields(line[1:])
		pgid, err := strconv.Atoi(f[0])
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			ms := int64(0)
			if len(f) > 1 {
				ms, _ = strconv.ParseInt(f[1], 10, 64)
			}
			groups[pgid] = time.Duration(ms) * time.Millisecond
		case '-':
			delete(groups, pgid)
		}
	}
	stopGroups(groups)
}

// stopGroups sends SIGTERM to every group, then SIGKILL to each one still
// alive once its delay has passed. It returns when every group is gone or
// has had its SIGKILL.
func stopGroups(groups map[int]time.Duration) {
	start := time.Now()
	for pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
	}
	for len(groups) > 0 {
		time.Sleep(20 * time.Millisecond)
		for pgid, after := range groups {
			switch {
			case syscall.Kill(-pgid, 0) != nil: // the group is gone
				delete(groups, pgid)
			case time.Since(start) >= after:
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				delete(groups, pgid)
			}
		}
	}
}

// guardian is loanq's side: the pipe to its guard and what it watches.
type guardian struct {
	mu     sync.Mutex
	w      *os.File // nil while no guard runs
	groups map[int]time.Duration
}

var guard = &guardian{groups: map[int]time.Duration{}}

// watch registers a command's process group. A guard that is gone (killed
// on its own) is replaced, and the new one is told every group.
func (g *guardian) watch(pgid int, killAfter time.Duration) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.groups[pgid] = killAfter
	if g.w != nil {
		if _, err := fmt.Fprintf(g.w, "+%d %d\n", pgid, killAfter.Milliseconds()); err == nil {
			return nil
		}
		g.w.Close()
		g.w = nil
	}
	if err := g.start(); err != nil {
		delete(g.groups, pgid)
		return err
	}
	return nil
}

// forget unregisters a group whose command has ended.
func (g *guardian) forget(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.groups, pgid)
	if g.w != nil {
		if _, err := fmt.Fprintf(g.w, "-%d\n", pgid); err != nil {
			g.w.Close()
			g.w = nil
		}
	}
}

// start runs a guard and sends it every registered group. Called with g.mu.
func (g *guardian) start() error {
	exe, err := selfExe()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe() // close-on-exec: no command inherits the write end
	if err != nil {
		return err
	}
	cmd := &exec.Cmd{Path: exe, Args: []string{"loanq-guard"}, Env: []string{guardEnv + "=1"}, Stdin: r, Dir: "/",
		// Its own process group: a signal to loanq's group (Ctrl-C) is not for it.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return err
	}
	r.Close()
	go func() { _ = cmd.Wait() }() // reap it whenever it ends
	var b strings.Builder
	for pgid, d := range g.groups {
		fmt.Fprintf(&b, "+%d %d\n", pgid, d.Milliseconds())
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		w.Close()
		return err
	}
	g.w = w
	return nil
}
