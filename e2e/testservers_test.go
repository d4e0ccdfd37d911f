package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// scripts/test-servers.sh under LOANQ_TEST_INSTALL=0 (the `make test` mode
// for machines where nothing may be installed): with a PATH without the
// tools and the script's other places pointed at empty directories, it fails
// before anything runs, naming every missing package, never calls apt-get
// (a recording stand-in here, though the test may run as root), and leaves
// no temporary directory behind. With everything present it passes.
func TestTestServersInstallOff(t *testing.T) {
	t.Parallel()
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin, empty, marks := t.TempDir(), t.TempDir(), t.TempDir()
	for _, tool := range []string{"bash", "mktemp", "chmod", "id", "tr", "cat", "rm", "seq", "sleep"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	fake := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fake("apt-get", "touch "+marks+"/apt-get-called; exit 0")
	run := func(script string, env ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "bash"), "-c", `. scripts/test-servers.sh; echo "$LOANQ_THROWAWAY_DIR"; trap stop_test_servers EXIT; `+script)
		cmd.Dir = repo
		cmd.Env = append([]string{"PATH=" + bin, "LOANQ_TEST_INSTALL=0", "LOANQ_TEST_SBIN=" + empty, "LOANQ_TEST_PGLIB=" + empty,
			"LOANQ_TEST_PG_PORT=1", "LOANQ_TEST_MYSQL_PORT=1"}, env...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		dir := strings.TrimSpace(strings.SplitN(out.String(), "\n", 2)[0])
		if !strings.Contains(dir, "loanq-test-servers.") {
			t.Fatalf("no throwaway directory printed: %q", out.String())
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s left behind after the script ended (%v)", dir, err)
		}
		return code, out.String(), errb.String()
	}

	code, out, stderr := run("check_requirements; echo after-the-check")
	want := "LOANQ_TEST_INSTALL=0 and these packages are missing: postgresql mariadb-server chromium nftables pgbouncer"
	if code != 1 || !strings.Contains(stderr, want) || strings.Contains(out, "after-the-check") {
		t.Errorf("nothing installed: exit %d, stdout %q, stderr:\n%s\nwant exit 1 and %q", code, out, stderr, want)
	}
	// Each ensure_ step on its own also refuses to install.
	code, _, stderr = run("ensure_nft")
	if code != 1 || !strings.Contains(stderr, "nftables is required") {
		t.Errorf("ensure_nft: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(marks, "apt-get-called")); err == nil {
		t.Errorf("apt-get was called under LOANQ_TEST_INSTALL=0")
	}

	for _, tool := range []string{"chromium", "nft", "pgbouncer"} {
		fake(tool, "exit 0")
	}
	code, out, stderr = run("check_requirements; echo after-the-check",
		"LOANQ_TEST_POSTGRES_DSN=postgres://x@127.0.0.1:1/x", "LOANQ_TEST_MYSQL_DSN=mysql://x@127.0.0.1:1/x")
	if code != 0 || !strings.Contains(stderr, "every package the tests need is there") || !strings.Contains(out, "after-the-check") {
		t.Errorf("everything there: exit %d, stdout %q, stderr:\n%s", code, out, stderr)
	}
}
