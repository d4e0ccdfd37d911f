package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testdb"
)

// The holder's connection is cut in the middle of its transaction: while it
// holds the task lock inside a 4 s criteria query, its server-side session
// is killed the way a DBA would (PostgreSQL: pg_terminate_backend; MariaDB:
// KILL). The server rolls the transaction back and frees the row lock; the
// holder fails with exit 1 and one clear line when it wakes; the pending
// requests (a waiting caller's and the holder's own) are served by the next
// caller's recheck; the audit is clean. Only loanq's own session in the
// test's own database is killed. SQLite has no server session to cut.
func TestFaultSessionKilled(t *testing.T) {
	for _, dialect := range []string{"postgres", "mysql"} {
		t.Run(dialect, func(t *testing.T) { sessionKilled(t, testdb.Fresh(t, dialect)) })
	}
}

func sessionKilled(t *testing.T, dsn string) {
	d, e := prepare(t, dsn, 20)
	mustOK(t, dsn, "admin", "task", "create", "cut", "--where", "eligible = 1", "--order", "priority", "--query-delay", "4s")
	id := taskID(t, e, "cut")

	holder := startProc(t, dsn, "doomed", 3*time.Minute,
		append([]string{"--output", "json", "work", "get", "cut", "--count", "2"}, fastRecheck...)...)
	waitUntilLocked(t, d, e, id, drivers.Skip)
	r := loanq(t, dsn, "patient", "--output", "json", "work", "get", "cut", "--no-wait")
	if r.code != 75 {
		t.Fatalf("a caller while the holder is in its query: exit %d, want 75\n%s%s", r.code, r.stdout, r.stderr)
	}
	waiting := decode(t, r)

	session := killHolderSession(t, d, e.DB)
	t.Logf("%s: killed the holder's session %d inside its transaction", d.Name(), session)

	hr := holder.wait()
	if holder.hung {
		t.Fatal("the holder hung after its session was killed")
	}
	cleanFailure(t, "holder whose session was killed", hr)
	t.Logf("the holder said: %s", hr.stderr)
	holderReq := requestIDOf(t, hr.stderr)

	// The lock is free at once: the server ended the transaction.
	lockFree(t, d, e, id, drivers.Skip)
	// The next caller serves both pending requests (the demo query delay
	// is turned off first: it is not what is tested).
	testdb.Exec(t, d, e.DB, "UPDATE loanq_task SET query_delay_ms = 0 WHERE id = ?", id)
	r = mustOK(t, dsn, "patient", append([]string{"--output", "json", "work", "status", strconv.FormatInt(waiting.RequestID, 10), "--wait"}, fastRecheck...)...)
	if got := decode(t, r); got.Status != "assigned" || len(got.Loans) != 1 {
		t.Fatalf("waiting request after the recheck: %+v", got)
	}
	// The holder retries as its message says and finds its request served.
	r = mustOK(t, dsn, "doomed", append([]string{"--output", "json", "work", "status", strconv.FormatInt(holderReq, 10), "--wait"}, fastRecheck...)...)
	if got := decode(t, r); got.Status != "assigned" || len(got.Loans) != 2 || got.User != "doomed" {
		t.Fatalf("the holder's request after its retry: %+v", got)
	}
	if got := pipelineLoans(t, dsn, "doomed", "cut"); len(got) != 2 {
		t.Fatalf("pipeline of the holder: %v", got)
	}
	if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ?", id); n != 3 {
		t.Fatalf("%d work rows, want 3", n)
	}
	audit(t, e)
	lockFree(t, d, e, id, drivers.Skip)
}

// killHolderSession finds the one loanq session of this database that sits
// idle inside a transaction — the holder in its criteria query — and kills
// it from another session. It returns the session id.
func killHolderSession(t *testing.T, d drivers.Driver, db *sql.DB) int64 {
	t.Helper()
	ctx := context.Background()
	find := map[string]string{
		// application_name is set by loanq's PostgreSQL driver.
		"postgres": `SELECT pid FROM pg_stat_activity
WHERE datname = current_database() AND application_name = 'loanq'
  AND state = 'idle in transaction' AND pid <> pg_backend_pid()`,
		// The holder's InnoDB transaction, on a connection of this database
		// that is idle (Sleep) between statements.
		"mysql": `SELECT p.ID FROM information_schema.innodb_trx x
JOIN information_schema.processlist p ON p.ID = x.trx_mysql_thread_id
WHERE p.DB = DATABASE() AND p.COMMAND = 'Sleep' AND p.ID <> CONNECTION_ID()`,
	}[d.Name()]
	deadline := time.Now().Add(time.Minute)
	for {
		var ids []int64
		rows, err := db.QueryContext(ctx, find)
		if err != nil {
			t.Fatalf("finding the holder's session: %v", err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		if len(ids) == 1 {
			kill := map[string]string{"postgres": fmt.Sprintf("SELECT pg_terminate_backend(%d)", ids[0]),
				"mysql": fmt.Sprintf("KILL %d", ids[0])}[d.Name()]
			if _, err := db.ExecContext(ctx, kill); err != nil {
				t.Fatalf("%s: %v", kill, err)
			}
			return ids[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("found %d sessions idle in a transaction, want exactly the holder's", len(ids))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
