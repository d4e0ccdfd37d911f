//go:build unix

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A database in a directory loanq may not write is refused as
// such (exit 2, the directory named), not as SQLite's "unable to open
// database file (14)": for a new file and for an existing one (SQLite writes
// its journal and WAL files beside it). As root, which may write anywhere,
// the binary runs as nobody (uid 65534).
func TestReadOnlyDirectoryIsNamed(t *testing.T) {
	// No t.Parallel: as root it changes the mode of the directory of the binary every test runs.
	dir, err := os.MkdirTemp("", "loanq-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755); os.RemoveAll(dir) })
	if r := bare(t, dir, "--db", "sqlite:"+filepath.Join(dir, "old.db"), "migrate", "up"); r.code != 0 {
		t.Fatalf("migrate up: exit %d\n%s", r.code, r.stderr)
	}
	if err := os.Chmod(filepath.Join(dir, "old.db"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// nobody must reach the binary: its directory is MkdirTemp's 0700.
		if err := os.Chmod(filepath.Dir(binary), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		args []string
		verb string
	}{
		{"default database", []string{"task", "list"}, "create"},
		{"new file by migrate up", []string{"--db", "sqlite:" + filepath.Join(dir, "new.db"), "migrate", "up"}, "create"},
		{"existing file", []string{"--db", "sqlite:" + filepath.Join(dir, "old.db"), "task", "list"}, "write"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			cmd := bareCommand(dir, args...)
			if os.Geteuid() == 0 {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			}
			r := runCmd(t, cmd)
			want := "its directory " + dir + " is not writable, and SQLite must " + c.verb + " files there"
			if r.code != 2 || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "(14)") {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", r.code, r.stderr, want)
			}
		})
	}
}
