package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
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
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
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
