//go:build !windows

package child

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// gateEnv marks the process that becomes a command (Start): loanq itself,
// started with the command's path and arguments, fd 3 the read end of the
// gate pipe. Checked in init (guard.go).
const gateEnv = "LOANQ_INTERNAL_CHILD_EXEC"

// runGate waits for loanq's go (one byte on fd 3: the command's process
// group is watched by the guard), then replaces itself with the command:
// os.Args[1] is its path, os.Args[2:] its arguments, the environment is its
// own without gateEnv. Without the go (loanq died first) it runs nothing.
func runGate() {
	gate := os.NewFile(3, "gate")
	var b [1]byte
	if n, _ := gate.Read(b[:]); n != 1 || len(os.Args) < 3 {
		os.Exit(125)
	}
	syscall.CloseOnExec(3) // the command does not inherit the pipe
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, gateEnv+"=") {
			env = append(env, kv)
		}
	}
	err := syscall.Exec(os.Args[1], os.Args[2:], env)
	fmt.Fprintf(os.Stderr, "loanq: cannot run %s: %v\n", os.Args[1], err)
	os.Exit(127)
}
