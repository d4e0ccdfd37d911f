package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// previousRelease is the last commit before migrations 00008-00012: the
// binary a fleet runs while the schema is migrated to this version's.
const previousRelease = "009b09c"

// buildPrevious builds previousRelease's loanq from this repository's git
// history (git archive, then go build; the module cache serves its
// dependencies). It fails with what to do when the history is not there
// (a shallow clone, a source archive).
func buildPrevious(t *testing.T) string {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("the upgrade test builds loanq %s from git history, but this is not a git checkout (%v): run it from a clone", previousRelease, err)
	}
	repo := strings.TrimSpace(string(top))
	if out, err := exec.Command("git", "-C", repo, "cat-file", "-e", previousRelease+"^{commit}").CombinedOutput(); err != nil {
		t.Fatalf("commit %s (the previous version) is not in this clone's history (%s): fetch it, e.g. `git fetch --unshallow`", previousRelease, strings.TrimSpace(string(out)))
	}
	dir := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", repo, previousRelease, dir)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("extracting %s: %v\n%s", previousRelease, err, out)
	}
	bin := filepath.Join(dir, "loanq-previous")
	// -trimpath: without it Go's build cache keys each package on its
	// directory too, and this one is new at every run, so the previous
	// version was compiled from nothing every time (about 30 s of CPU).
	build := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building loanq %s: %v\n%s", previousRelease, err, out)
	}
	return bin
}

// previous runs the previous version's binary as command runs this one's.
func previous(ctx context.Context, bin, dsn, user string, args ...string) *exec.Cmd {
	cmd := command(ctx, dsn, user, args...)
	cmd.Path, cmd.Args[0] = bin, bin
	return cmd
}

func runPrevious(t *testing.T, bin, dsn, user string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := previous(ctx, bin, dsn, user, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running loanq %s %v: %v", previousRelease, args, err)
	}
	return r
}

// A rolling upgrade from the previous version (docs/operations.md): a
// previous-version `work run` started before the migration keeps getting and
// dispositioning loans on the new schema (task create -> work get ->
// disposition, each loan once), and the new binary reads what it did; a
// previous-version process started after the migration refuses to run
// (exit 2, "newer than this loanq knows") and changes nothing.
func TestPreviousVersionAcrossTheMigration(t *testing.T) {
	t.Parallel()
	old := buildPrevious(t)
	testdb.Each(t, func(t *testing.T, dsn string) {
		const loans = 16
		if r := runPrevious(t, old, dsn, "admin", "migrate", "up"); r.code != 0 {
			t.Fatalf("previous migrate up: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		d, db := testdb.Open(t, dsn)
		testdb.CreateLoans(t, d, db, loans)
		if r := runPrevious(t, old, dsn, "admin", "task", "create", "up", "--where", "eligible = 1", "--order", "priority"); r.code != 0 {
			t.Fatalf("previous task create: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}

		// The previous version's processor: each loan takes 0.25 s and is
		// dispositioned never (so it does not come back).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		run := previous(ctx, old, dsn, "ana", "work", "run", "up", "--until-empty", "--concurrency", "1", "--",
			"sh", "-c", "sleep 0.25; exit 65")
		var out, errb bytes.Buffer
		run.Stdout, run.Stderr = &out, &errb
		if err := run.Start(); err != nil {
			t.Fatal(err)
		}
		for testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE disposition IS NOT NULL") < 3 {
			if ctx.Err() != nil {
				t.Fatalf("the previous work run did not get going: %s", errb.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		mig := mustOK(t, dsn, "admin", "migrate", "up")
		before := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE disposition IS NOT NULL")
		if err := run.Wait(); err != nil {
			// PostgreSQL: migration 00013 makes loanq's loan ids text, and
			// PostgreSQL refuses the previous version's comparison of them
			// with an integer key (no implicit cast), so a previous-version
			// process stops at its next get or disposition
			// (docs/operations.md: stop them before migrating past 00012).
			// Nothing it held is lost: its loan stays active and its
			// pending request stays pending, for the new binary to finish.
			// MariaDB: a previous-version write that meets the migration's
			// ALTER of loanq_work may be chosen as a deadlock victim (Error
			// 1213, exit 1; seen in a CI run): the previous version does not
			// retry it, and the same holds: nothing it held is lost. Or the
			// wait is a cycle no detector sees — the ALTER waiting for the
			// metadata lock of the previous version's open lock transaction,
			// whose next statement queues behind the ALTER — and the task's
			// hold limit (30 s) ends that transaction's session: the previous
			// version says so ("hold limit", exit 1; seen once in a clean-clone
			// run), the ALTER goes on, and again nothing it held is lost.
			stopped := (d.Name() == "postgres" && strings.Contains(errb.String(), "operator does not exist")) ||
				(d.Name() == "mysql" && (strings.Contains(errb.String(), "Error 1213") || strings.Contains(errb.String(), "hold limit")))
			if !stopped {
				t.Fatalf("previous work run across the migration: %v\nstdout:\n%s\nstderr:\n%s\nmigrate:\n%s", err, out.String(), errb.String(), mig.stdout)
			}
			// The new binary's run serves ana's pending request too (its
			// loans are hers, as for any request whose caller went away),
			// then what she holds is dispositioned by hand, as she would.
			mustOK(t, dsn, "ana", "work", "run", "up", "--until-empty", "--concurrency", "1", "--", "sh", "-c", "exit 65")
			for _, loan := range heldLoans(t, d, db, "ana") {
				mustOK(t, dsn, "ana", "disposition", "up", loan, "never")
			}
		} else if d.Name() == "postgres" {
			t.Fatalf("the previous work run crossed migration 00013 on PostgreSQL without an error: docs/operations.md says it stops\nstdout:\n%s", out.String())
		}
		if before >= loans {
			t.Fatalf("the migration ended after the previous work run had done every loan (%d): nothing ran on the new schema", before)
		}
		if n := testdb.Int(t, d, db, "SELECT COUNT(DISTINCT loan_id) FROM loanq_work WHERE disposition = 'never' AND user_name = 'ana'"); n != loans {
			t.Errorf("%d distinct loans dispositioned never, want %d", n, loans)
		}
		if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work"); n != loans {
			t.Errorf("%d work rows, want %d (each loan once)", n, loans)
		}
		show := mustOK(t, dsn, "admin", "--output", "json", "task", "show", "up")
		if !strings.Contains(show.stdout, `"loans": 0`) {
			t.Errorf("new task show after the previous run: want a backlog of 0\n%s", show.stdout)
		}

		// Started after the migration, the previous version refuses.
		for _, args := range [][]string{
			{"task", "create", "later", "--where", "eligible = 1"},
			{"work", "get", "up"},
			{"disposition", "up", "1", "complete"},
		} {
			r := runPrevious(t, old, dsn, "ana", args...)
			if r.code != 2 || !strings.Contains(r.stderr, "newer than this loanq knows") {
				t.Errorf("previous %v on the new schema: exit %d\n%s", args, r.code, r.stderr)
			}
		}
		if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_task"); n != 1 {
			t.Errorf("%d tasks after the refused task create, want 1", n)
		}
	})
}

// heldLoans lists the loans user holds in any task, as text.
func heldLoans(t *testing.T, d drivers.Driver, db *sql.DB, user string) []string {
	t.Helper()
	rows, err := db.Query(testdb.Rebind(d, "SELECT loan_id FROM loanq_work WHERE user_name = ? AND disposition IS NULL"), user)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
