package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// The lines demo seed suggests are commands to type in the same shell: when
// LOANQ_DB gives the database they leave --db out (and with it a password
// shown as *** to type again), and they work as printed; when --db names
// another database than LOANQ_DB, they keep it.
func TestDemoSeedTryLinesFollowLoanqDB(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres", "mysql"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			dsn := testdb.Fresh(t, dialect)
			env := []string{"LOANQ_DB=" + dsn, "LOANQ_USER=ana"}
			r := runEnv(t, env, "demo", "seed", "--loans", "20")
			if r.code != 0 {
				t.Fatalf("demo seed with LOANQ_DB: exit %d: %s%s", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, "   loanq task list\n") || strings.Contains(r.stdout, "--db") {
				t.Fatalf("with LOANQ_DB set, the Try lines should read `loanq task list`, without --db:\n%s", r.stdout)
			}
			// As printed, in the same environment, they reach the seeded database.
			if r := runEnv(t, env, "task", "list"); r.code != 0 || !strings.Contains(r.stdout, "verify-bank") {
				t.Errorf("`loanq task list` with LOANQ_DB: exit %d: %s%s", r.code, r.stdout, r.stderr)
			}

			// --db naming another database than LOANQ_DB: the lines must say which.
			other := "sqlite:" + filepath.Join(t.TempDir(), "other.db")
			r = runEnv(t, []string{"LOANQ_DB=" + other, "LOANQ_USER=ana"}, "--db", dsn, "demo", "seed", "--loans", "20")
			if r.code != 0 {
				t.Fatalf("demo seed --db with another LOANQ_DB: exit %d: %s%s", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, "loanq --db '") {
				t.Errorf("--db differs from LOANQ_DB, yet the Try lines leave it out:\n%s", r.stdout)
			}
		})
	}
}

// migrate up on a dialect without migration 00007 (PostgreSQL's only) says
// so, where its count is one short of the schema version; on PostgreSQL it
// says nothing of the kind.
func TestMigrateUpExplainsSkippedVersions(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres", "mysql"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			dsn := testdb.Fresh(t, dialect)
			r := loanq(t, dsn, "admin", "migrate", "up")
			if r.code != 0 {
				t.Fatalf("migrate up: exit %d: %s%s", r.code, r.stdout, r.stderr)
			}
			const note = "(no migration 7 here: 00007_bench_ready_index is for PostgreSQL only)"
			if dialect == "postgres" {
				if strings.Contains(r.stdout, "no migration") || !strings.Contains(r.stdout, " 6 7 8 ") {
					t.Errorf("PostgreSQL applies 00007 and needs no note:\n%s", r.stdout)
				}
				return
			}
			if !strings.Contains(r.stdout, " 6 8 ") || !strings.Contains(r.stdout, note) {
				t.Errorf("migrate up on %s skips 7 without saying why; want %q in:\n%s", dialect, note, r.stdout)
			}
		})
	}
}
