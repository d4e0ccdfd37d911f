package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// `loanq version` of a `go build` with GOFLAGS=-buildvcs=false, from this
// source tree (a git checkout): the commit is unknown because the build
// was not stamped, and the line says so, not that the binary was built
// outside a git checkout. A build stamped as `make build` stamps it shows
// the commit.
func TestVersionWithoutVCSStamping(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	build := func(name string, args ...string) string {
		t.Helper()
		bin := filepath.Join(dir, name)
		cmd := exec.Command("go", append(append([]string{"build"}, args...), "-o", bin, "..")...)
		cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -buildvcs=false"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %v: %v\n%s", args, err, out)
		}
		out, err := exec.Command(bin, "version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s version: %v\n%s", name, err, out)
		}
		return string(out)
	}
	out := build("plain")
	if !strings.Contains(out, "commit:     unknown (built without VCS stamping; use make build)\n") || strings.Contains(out, "not built from a git checkout") {
		t.Fatalf("version of a build with -buildvcs=false:\n%s", out)
	}
	out = build("stamped", "-ldflags", "-X github.com/loanq/loanq/commands.Commit=0123abcd")
	if !strings.Contains(out, "commit:     0123abcd\n") {
		t.Fatalf("version of a build stamped with the commit:\n%s", out)
	}
}

// Nothing costly runs at package init (ARCHITECTURE.md, "Rules that hold
// everywhere"): every call of loanq is a process, and scripts call it in
// loops. Counted in allocations, which do not depend on the machine's load:
// loanq's own packages made 49,242 at init when the drivers built their
// statement catalogues there (17 ms of a 26 ms `loanq version`), 580 after
// (BENCHMARKS.md, "Start-up").
func TestInitIsCheap(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var trace strings.Builder
	cmd.Stderr = &trace
	if err := cmd.Run(); err != nil {
		t.Fatalf("loanq version: %v\n%s", err, trace.String())
	}
	// init github.com/loanq/loanq/drivers @4.2 ms, 0.040 ms clock, 16280 bytes, 160 allocs
	allocs, packages := 0, 0
	for _, line := range strings.Split(trace.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "init" || !strings.HasPrefix(f[1], "github.com/loanq/loanq") || f[len(f)-1] != "allocs" {
			continue
		}
		n, err := strconv.Atoi(f[len(f)-2])
		if err != nil {
			t.Fatalf("inittrace line %q: %v", line, err)
		}
		allocs += n
		packages++
	}
	if packages < 5 {
		t.Fatalf("inittrace named %d of loanq's packages, want the drivers among them:\n%s", packages, trace.String())
	}
	if allocs > 5000 {
		t.Errorf("loanq's packages allocate %d times at init (580 when this test was written): something costly moved into init (a var built by a function call, a regexp with counted repetitions):\n%s", allocs, trace.String())
	}
}
