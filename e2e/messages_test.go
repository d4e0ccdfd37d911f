package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// cappedAnswer is the JSON of work get with the field the per-user cap adds
// (docs/json.md, "capped_at").
type cappedAnswer struct {
	Status   string  `json:"status"`
	Assigned int     `json:"assigned"`
	Loans    []int64 `json:"loans"`
	CappedAt int     `json:"capped_at"`
}

// A user at the task's per-user cap (--max-active) is told so,
// instead of "partial" and then "empty, no loan available" while loans
// match; a request cut short by a lack of loans is not said to be capped.
// Every way of serving: each lock strategy of the dialect, and the pool.
func TestCapNoticeNamesTheCap(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, _ := prepare(t, dsn, 20)
		type variant struct{ name, flag, value string }
		var variants []variant
		for _, s := range d.Capabilities().Strategies {
			variants = append(variants, variant{string(s), "--lock", string(s)})
		}
		variants = append(variants, variant{"pool", "--prefetch", "10"})
		for _, v := range variants {
			t.Run(v.name, func(t *testing.T) {
				task := "cap-" + v.name
				mustOK(t, dsn, "admin", "task", "create", task, "--where", "eligible = 1", "--order", "priority", "--max-active", "2", v.flag, v.value)
				says := "your cap of 2 active loan(s) in task " + task + " is reached"

				r := mustOK(t, dsn, "ana", "--output", "json", "work", "get", task, "--count", "5")
				a := decodeCapped(t, r)
				if a.Status != "partial" || a.Assigned != 2 || a.CappedAt != 2 || !strings.Contains(r.stderr, says) {
					t.Fatalf("first get at the cap: %+v, stderr %q; want partial, 2 assigned, capped_at 2 and %q", a, r.stderr, says)
				}
				r = mustOK(t, dsn, "ana", "work", "get", task, "--count", "5")
				if !strings.Contains(r.stdout, "empty") || !strings.Contains(r.stderr, says) || !strings.Contains(r.stderr, "you hold 2") {
					t.Fatalf("second get over the cap: stdout %q stderr %q; want empty and %q, you hold 2", r.stdout, r.stderr, says)
				}
				r = mustOK(t, dsn, "ana", "--output", "json", "work", "get", task, "--count", "1")
				if a := decodeCapped(t, r); a.Status != "empty" || a.CappedAt != 2 {
					t.Fatalf("JSON of a get over the cap: %+v; want empty with capped_at 2", a)
				}

				// Below the cap, out of loans: partial, and no word of a cap.
				few := "few-" + v.name
				mustOK(t, dsn, "admin", "task", "create", few, "--where", "eligible = 1 AND id <= 3", "--order", "priority", "--max-active", "10", v.flag, v.value)
				r = mustOK(t, dsn, "bo", "--output", "json", "work", "get", few, "--count", "5")
				if a := decodeCapped(t, r); a.Status != "partial" || a.Assigned != 3 || a.CappedAt != 0 || strings.Contains(r.stderr, "cap") {
					t.Fatalf("partial for want of loans: %+v, stderr %q; want partial, 3 assigned, no capped_at, no cap notice", a, r.stderr)
				}
			})
		}
	})
}

func decodeCapped(t *testing.T, r result) cappedAnswer {
	t.Helper()
	var a cappedAnswer
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
		t.Fatalf("not JSON: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	return a
}

// bare runs the binary in dir with args only: no --db, no --user, and none of
// LOANQ_DB, DATABASE_URL, LOANQ_USER, as a newcomer types it.
func bare(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return runCmd(t, bareCommand(dir, args...))
}

func bareCommand(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOANQ_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running loanq %v: %v", cmd.Args, err)
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic:") {
		t.Fatalf("loanq %v printed a stack trace:\n%s", cmd.Args, r.stderr)
	}
	return r
}

// The zero-set-up default database is named when a command creates
// it and each time one reads it, so "no tasks yet" is not said about a file
// nobody knew of. A --db the user gave is not announced.
func TestDefaultDatabaseIsNamed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "loanq.db")
	r := bare(t, dir, "task", "list")
	if r.code != 0 || !strings.Contains(r.stderr, "created the default database "+file) || !strings.Contains(r.stderr, "LOANQ_DB") {
		t.Fatalf("first task list: exit %d, stderr %q; want 0 and \"created the default database %s\"", r.code, r.stderr, file)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the default database named was not created: %v", err)
	}
	r = bare(t, dir, "task", "list")
	if r.code != 0 || !strings.Contains(r.stderr, "using the default database "+file) {
		t.Fatalf("second task list: exit %d, stderr %q; want \"using the default database %s\"", r.code, r.stderr, file)
	}
	r = bare(t, dir, "--db", "sqlite:"+file, "task", "list")
	if r.code != 0 || strings.Contains(r.stderr, "default database") {
		t.Fatalf("task list --db: exit %d, stderr %q; want 0 and no word of the default", r.code, r.stderr)
	}
}

// Argument and DSN mistakes name the cause and the fix, exit 2.
func TestMessagesNameTheCause(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct {
		name  string
		args  []string
		says  []string
		never string
	}{
		{"global flag misspelled", []string{"--usr", "ana", "pipeline"}, []string{"unknown flag --usr", "did you mean --user?"}, "unknown command"},
		{"command flag misspelled", []string{"work", "get", "--cout", "3", "t"}, []string{"unknown flag --cout for `loanq work get`", "did you mean --count?"}, ""},
		{"flag unlike any", []string{"task", "list", "--bogus"}, []string{"unknown flag --bogus for `loanq task list`", "see `loanq task list --help`"}, ""},
		{"JDBC URL", []string{"--db", "jdbc:oracle:thin:scott/" + secret + "@db:1521/ORCL", "task", "list"},
			[]string{`unknown database scheme "jdbc"`, "oracle://USER:PASS@HOST:PORT/SERVICE", "postgres://"}, "***"},
		{"JDBC URL with a password parameter", []string{"--db", "jdbc:postgresql://db/x?user=a&password=" + secret, "task", "list"},
			[]string{`unknown database scheme "jdbc"`, "postgres://USER@HOST/DB"}, "db/x"},
		{"other scheme", []string{"--db", "pgx://a:" + secret + "@db/x", "task", "list"}, []string{`unknown database scheme "pgx"`, "postgres://"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := bare(t, dir, c.args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2\n%s", r.code, r.stderr)
			}
			for _, s := range c.says {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr %q does not say %q", r.stderr, s)
				}
			}
			if c.never != "" && strings.Contains(r.stderr, c.never) {
				t.Errorf("stderr %q says %q", r.stderr, c.never)
			}
			if strings.Contains(r.stderr+r.stdout, secret) {
				t.Errorf("the password was printed: %q", r.stderr)
			}
			if strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("more than one line: %q", r.stderr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "loanq.db")); err == nil {
		t.Error("a refused command created the default database")
	}
}
