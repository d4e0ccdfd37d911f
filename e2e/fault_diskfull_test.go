package e2e

import (
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// The SQLite file sits on a filesystem that fills up: a 4 MiB tmpfs the test
// mounts itself, filled to the last block by a filler file. `work get` then
// fails with exit 1 and one line saying the filesystem is full; nothing is
// half-written (the audit is clean, no assignment exists, a request that was
// recorded stays pending); once the filler is removed the same command works
// and the pending request is served. Twice: while another connection keeps
// the database open (the write fails inside the transaction: SQLITE_FULL),
// and with nobody else connected (SQLite cannot even create its -wal file).
func TestFaultSQLiteDiskFull(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mounting a 4 MiB tmpfs on %s (the disk-full test needs root and mount): %v\n%s", dir, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	dsn := "sqlite:" + filepath.Join(dir, "loanq.db")
	d, e := prepare(t, dsn, 50)
	mustOK(t, dsn, "admin", "task", "create", "full", "--where", "eligible = 1", "--order", "priority")
	id := taskID(t, e, "full")

	for _, othersConnected := range []bool{true, false} {
		// An empty WAL: the next write must grow it.
		testdb.Exec(t, d, e.DB, "PRAGMA wal_checkpoint(TRUNCATE)")
		if !othersConnected {
			e.DB.Close()
		}
		filler := filepath.Join(dir, "filler")
		out, _ := exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=4k").CombinedOutput()
		if !strings.Contains(string(out), "No space left") {
			t.Fatalf("filling the tmpfs: %s", out)
		}
		r := loanq(t, dsn, "ana", "--output", "json", "work", "get", "full", "--count", "2")
		msg := strings.TrimSpace(r.stderr)
		if r.code != 1 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "full") {
			t.Fatalf("work get on a full filesystem (others connected: %v): exit %d, want 1 and one line saying the disk is full:\n%s", othersConnected, r.code, r.stderr)
		}
		t.Logf("full filesystem, others connected %v: %s", othersConnected, msg)
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		if !othersConnected {
			// A new engine over a new connection: the engine keeps its
			// database to itself, and the old one is closed.
			var db *sql.DB
			d, db = testdb.Open(t, dsn)
			e = newEngine(db, d)
		}
		// Nothing half-written: no assignment; a recorded request is pending.
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND user_name = 'ana' AND disposition IS NULL", id); n != 0 {
			t.Fatalf("%d assignments written on a full filesystem", n)
		}
		audit(t, e)
		// Space is back: work resumes.
		r = mustOK(t, dsn, "ana", "--output", "json", "work", "get", "full", "--count", "2")
		if got := decode(t, r); got.Status != "assigned" || len(got.Loans) != 2 {
			t.Fatalf("work get once space is back: %+v", got)
		}
		recheckAll(t, dsn, d, e, id)
		audit(t, e)
		testdb.Exec(t, d, e.DB, "UPDATE loanq_work SET disposition = 'never', disposed_at = assigned_at WHERE disposition IS NULL")
	}
}
