package commands

import (
	"bytes"
	"strings"
	"testing"
)

// The commit line says why the commit is unknown only as far as the build
// information can tell: a build without VCS stamping (-buildvcs=false, a
// worktree, no .git) is not claimed to be "not from a git checkout".
func TestVersionCommitText(t *testing.T) {
	for _, c := range []struct {
		name string
		v    versionInfo
		want string
	}{
		{"stamped by go build or make build", versionInfo{Commit: "abc123"}, "abc123"},
		{"with uncommitted changes", versionInfo{Commit: "abc123", Modified: true}, "abc123 (with uncommitted changes)"},
		{"no VCS stamping", versionInfo{}, "unknown (built without VCS stamping; use make build)"},
		{"go install of a version", versionInfo{module: "v1.2.0"}, "unknown (installed as module version v1.2.0, not built from a git checkout)"},
	} {
		var b bytes.Buffer
		c.v.text(&b)
		if !strings.Contains(b.String(), "commit:     "+c.want+"\n") {
			t.Errorf("%s: version text\n%s\nwant the commit line %q", c.name, b.String(), c.want)
		}
	}
}
