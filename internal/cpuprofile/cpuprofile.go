// Package cpuprofile writes a CPU profile of one loanq process when
// LOANQ_CPUPROFILE names a file: how a short command spends its CPU, which
// `go tool pprof` reads, the files of many runs together
// (`go tool pprof -top loanq run1.pprof run2.pprof …`). "%p" in the name
// is the process id: the processes a bench or `work run` starts inherit
// the variable, and each then writes a file of its own. BENCHMARKS.md,
// "How to reproduce" (S2), says how the per-process costs were found with
// it.
package cpuprofile

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
)

// Env is the variable naming the profile's file.
const Env = "LOANQ_CPUPROFILE"

// Start begins the profile when Env is set and returns the function that
// ends it and writes the file (a no-op otherwise). A file that cannot be
// written is said on stderr and the command runs unprofiled: a profile is
// a developer's aid, never a reason for a command to fail.
func Start() (stop func()) {
	path := os.Getenv(Env)
	if path == "" {
		return func() {}
	}
	path = strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid()))
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loanq: %s: %v\n", Env, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "loanq: %s: %v\n", Env, err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
