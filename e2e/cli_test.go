package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// run runs the binary with exactly args (no --db or --user added) in dir,
// with env added to an environment free of LOANQ_* and DATABASE_URL.
func run(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOANQ_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// The usual affordances of a command line: help TOPIC, did you mean, version,
// DATABASE_URL, LOANQ_OUTPUT in any case, aliases for sql --dialect.
func TestCommandLineHabits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		name string
		env  []string
		args []string
		code int
		says []string // each must be in stdout+stderr
	}{
		{"mistyped subcommand", nil, []string{"task", "craete", "x", "--where", "1=1"}, 2, []string{`unknown command "craete"`, "did you mean `loanq task create`"}},
		{"mistyped command", nil, []string{"wrok", "get", "t"}, 2, []string{"did you mean `loanq work`"}},
		{"unknown command", nil, []string{"frobnicate"}, 2, []string{"the commands are:", "work"}},
		{"help topic", nil, []string{"help", "task"}, 0, []string{"loanq task - define and inspect"}},
		{"help subtopic", nil, []string{"help", "work", "get"}, 0, []string{"loanq work get - "}},
		{"version --help", nil, []string{"version", "--help"}, 0, []string{"loanq version - "}},
		{"completion --help", nil, []string{"help", "completion"}, 0, []string{"loanq completion - "}},
		{"version", nil, []string{"version"}, 0, []string{"loanq ", "go:", "databases:", "sqlite"}},
		{"--version", nil, []string{"--version"}, 0, []string{"go:", "databases:"}},
		{"version json", nil, []string{"-o", "json", "version"}, 0, []string{`"version":`, `"go":`, `"oracle":`}},
		{"LOANQ_OUTPUT upper case", []string{"LOANQ_OUTPUT=JSON"}, []string{"sql", "--dialect", "sqlite"}, 0, []string{`"purpose":`}},
		{"sql dialect alias", nil, []string{"sql", "--dialect", "mariadb"}, 0, []string{"statements for mysql"}},
		{"sql dialect postgresql", nil, []string{"sql", "--dialect", "postgresql"}, 0, []string{"statements for postgres"}},
		{"lease-ttl 0s", nil, []string{"--db", "sqlite:" + filepath.Join(dir, "a.db"), "task", "create", "t", "--where", "1=1", "--lease-ttl", "0s"}, 2, []string{"--lease-ttl"}},
		{"missing sqlite file", nil, []string{"--db", filepath.Join(dir, "typo.db"), "task", "list"}, 2, []string{"does not exist", "migrate up"}},
		{"missing sqlite file in LOANQ_DB", []string{"LOANQ_DB=sqlite:" + filepath.Join(dir, "typo2.db")}, []string{"work", "get", "t"}, 2, []string{"does not exist"}},
		{"missing sqlite file in DATABASE_URL", []string{"DATABASE_URL=sqlite:" + filepath.Join(dir, "typo3.db")}, []string{"task", "list"}, 2, []string{"typo3.db does not exist"}},
		{"unresolvable host printed once", nil, []string{"--db", "postgres://u@loanq-no-such-host.invalid:5432/x?connect_timeout=5", "task", "list"}, 1, []string{"does not resolve"}},
	}
	if r := run(t, dir, nil, "--db", "sqlite:"+filepath.Join(dir, "a.db"), "migrate", "up"); r.code != 0 {
		t.Fatalf("migrate up: %s", r.stderr)
	}
	for _, c := range cases {
		r := run(t, dir, c.env, c.args...)
		out := r.stdout + r.stderr
		if r.code != c.code {
			t.Errorf("%s: exit %d, want %d\n%s", c.name, r.code, c.code, out)
		}
		for _, s := range c.says {
			if !strings.Contains(out, s) {
				t.Errorf("%s: output does not say %q:\n%s", c.name, s, out)
			}
		}
		if strings.Count(out, "no such host") > 1 {
			t.Errorf("%s: the error is printed more than once:\n%s", c.name, out)
		}
	}
	for _, f := range []string{"typo.db", "typo2.db", "typo3.db"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s was created by a command that only reads", f)
		}
	}
	// The default loanq.db still creates itself; demo creates a named file.
	if r := run(t, dir, nil, "task", "list"); r.code != 0 {
		t.Errorf("task list on the default database: exit %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "loanq.db")); err != nil {
		t.Errorf("the default loanq.db was not created: %v", err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(run(t, dir, nil, "-o", "json", "version").stdout), &v); err != nil {
		t.Errorf("version JSON: %v", err)
	}
}

// DATABASE_URL is read when LOANQ_DB is not set, and LOANQ_DB wins over it.
func TestDatabaseURL(t *testing.T) {
	t.Parallel()
	pg := testdb.Fresh(t, "postgres")
	dir := t.TempDir()
	r := run(t, dir, []string{"DATABASE_URL=" + pg}, "-o", "json", "migrate", "status")
	if r.code != 0 || !strings.Contains(r.stdout, `"dialect": "postgres"`) {
		t.Fatalf("migrate status with DATABASE_URL: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	r = run(t, dir, []string{"DATABASE_URL=" + pg, "LOANQ_DB=sqlite:" + filepath.Join(dir, "x.db")}, "-o", "json", "migrate", "up")
	if r.code != 0 || !strings.Contains(r.stdout, `"dialect": "sqlite"`) {
		t.Fatalf("LOANQ_DB must win over DATABASE_URL: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
}

// `loanq completion bash` completes command words in a real bash; zsh and
// fish scripts are printed (neither shell is installed here to run them).
func TestCompletion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := run(t, dir, nil, "completion", "bash")
	if script.code != 0 {
		t.Fatalf("completion bash: exit %d %s", script.code, script.stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "c.bash"), []byte(script.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	for words, want := range map[string]string{"ta": "task", "task cr": "create", "work g": "get", "mig": "migrate"} {
		line := "loanq " + words
		n := len(strings.Fields(line)) - 1
		sh := `source c.bash; loanq() { "` + binary + `" "$@"; }; COMP_WORDS=(` + line + `); COMP_CWORD=` + strconv.Itoa(n) +
			`; COMP_WORDS[0]="` + binary + `"; _loanq_complete; echo "${COMPREPLY[@]}"`
		cmd := exec.Command("bash", "-c", sh)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("completing %q: got %q (%v), want %q", words, out, err, want)
		}
	}
	for _, shell := range []string{"zsh", "fish"} {
		if r := run(t, dir, nil, "completion", shell); r.code != 0 || !strings.Contains(r.stdout, "loanq") {
			t.Errorf("completion %s: exit %d %s", shell, r.code, r.stderr)
		}
	}
	if r := run(t, dir, nil, "completion", "tcsh"); r.code != 2 {
		t.Errorf("completion tcsh: exit %d, want 2", r.code)
	}
}

// While `work get` waits for the task lock, a terminal on stderr shows one
// status line (request id, pending for how long, next look); stderr that is
// not a terminal gets nothing extra. `script` gives the waiter a terminal.
func TestWaitingStatusLine(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("script"); err != nil {
		t.Fatal("this test needs script(1) from util-linux for a pseudo-terminal")
	}
	dsn := testdb.Fresh(t, "sqlite")
	prepare(t, dsn, 10)
	mustOK(t, dsn, "admin", "task", "create", "slow", "--where", "eligible = 1", "--query-delay", "60s", "--lease-ttl", "2m")
	holder := command(context.Background(), dsn, "holder", "work", "get", "slow")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	// The holder has the lease once lease_owner is set; only then start the waiters.
	d, db := testdb.Open(t, dsn)
	deadline := time.Now().Add(time.Minute)
	for testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_task WHERE name = 'slow' AND lease_owner IS NOT NULL") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the holder never took the task's lease")
		}
		time.Sleep(50 * time.Millisecond)
	}

	line := binary + " --db '" + dsn + "' --user waiter work get slow --timeout 2s --backoff 300ms"
	cmd := exec.Command("script", "-qec", line, "/dev/null")
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "\r\033[Krequest ") || !strings.Contains(string(out), "pending for") || !strings.Contains(string(out), "next look in") {
		t.Errorf("no status line on a terminal:\n%q", out)
	}
	r := loanq(t, dsn, "waiter2", "work", "get", "slow", "--timeout", "2s", "--backoff", "300ms")
	if r.code != 75 || strings.Contains(r.stderr, "\033[K") || strings.Contains(r.stderr, "next look") {
		t.Errorf("not a terminal: exit %d (want 75) and no status line, got stderr %q", r.code, r.stderr)
	}
}
