package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// The holder's connection is cut in the middle of its transaction: while it
// holds the task lock inside a 4 s criteria query, its server-side session
// is killed the way a DBA would (PostgreSQL: pg_terminate_backend; MariaDB:
// KILL). The server rolls the transaction back and frees the row lock; the
// holder fails with exit 1 and one clear line when it wakes; the pending
// requests (a waiting caller's and the holder's own) are served by the next
// caller's recheck; the audit is clean. Only loanq's own session in the
// test's own database is killed. SQLite has no server session to cut.
//
// Every strategy: the row-lock ones lose their transaction with the session;
// a lease holder runs its query outside any transaction, its idle pooled
// session is killed, and database/sql may reconnect under it — it is served
// or fails cleanly, and the invariants hold either way.
func TestFaultSessionKilled(t *testing.T) {
	t.Parallel() // its own databases: it kills sessions of its own database only
	for _, dialect := range []string{"postgres", "mysql"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel() // each kills sessions of its own database only
			dsn := testdb.Fresh(t, dialect)
			d, e := prepare(t, dsn, 40)
			for _, s := range d.Capabilities().Strategies {
				t.Run(string(s), func(t *testing.T) { sessionKilled(t, dsn, d, e, s) })
				testdb.Exec(t, d, e.DB, "UPDATE loanq_work SET disposition = 'never', disposed_at = assigned_at WHERE disposition IS NULL")
			}
		})
	}
}

func sessionKilled(t *testing.T, dsn string, d drivers.Driver, e *engine, s drivers.Strategy) {
	task := "cut-" + string(s)
	mustOK(t, dsn, "admin", "task", "create", task, "--where", "eligible = 1", "--order", "priority", "--query-delay", "4s",
		"--lock", string(s), "--lease-ttl", "6s")
	id := taskID(t, e, task)

	holder := startProc(t, dsn, "doomed", 3*time.Minute,
		append([]string{"--output", "json", "work", "get", task, "--count", "2"}, fastRecheck...)...)
	waitUntilLocked(t, d, e, id, s)
	if s == drivers.Rows {
		rowsClaimerKilled(t, dsn, d, e, id, holder)
		return
	}
	// A `wait` caller would queue behind the holder: this one asks with
	// nowait on the same task lock, to get its busy answer at once.
	probe := []string{"--output", "json", "work", "get", task, "--no-wait"}
	if s == drivers.Wait {
		probe = append(probe, "--lock", string(drivers.NoWait))
	}
	r := loanq(t, dsn, "patient", probe...)
	if r.code != 75 {
		t.Fatalf("a caller while the holder is in its query: exit %d, want 75\n%s%s", r.code, r.stdout, r.stderr)
	}
	waiting := decode(t, r)

	session := killHolderSession(t, d, e.DB, s)
	t.Logf("%s/%s: killed the holder's session %d", d.Name(), s, session)

	hr := holder.wait()
	if holder.hung {
		t.Fatal("the holder hung after its session was killed")
	}
	var holderReq int64
	if s == drivers.Lease && hr.code == 0 {
		holderReq = decode(t, hr).RequestID
		t.Logf("the lease holder reconnected and was served: %s", strings.TrimSpace(hr.stdout))
	} else {
		cleanFailure(t, "holder whose session was killed", hr)
		t.Logf("the holder said: %s", hr.stderr)
		holderReq = requestIDOf(t, hr.stderr)
	}

	// The lock is free at once: the server ended the transaction (a lease
	// is given back by its failing holder, or expires).
	lockFree(t, d, e, id, s)
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
	if got := pipelineLoans(t, dsn, "doomed", task); len(got) != 2 {
		t.Fatalf("pipeline of the holder: %v", got)
	}
	if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ?", id); n != 3 {
		t.Fatalf("%d work rows, want 3", n)
	}
	audit(t, e)
	lockFree(t, d, e, id, s)
}

// rowsClaimerKilled: under `rows` there is no task lock and no busy answer;
// the claimer holds the loan rows it locked, in its transaction, while its
// query runs, and its request is logged in that same transaction. Its
// session killed, it fails cleanly having assigned and recorded nothing —
// no request pending, none at all, no loan held, no lock left — and says
// so; asking again with `work get` gets the same top loans.
func rowsClaimerKilled(t *testing.T, dsn string, d drivers.Driver, e *engine, id int64, holder *proc) {
	session := killHolderSession(t, d, e.DB, drivers.Rows)
	t.Logf("%s/rows: killed the claimer's session %d", d.Name(), session)
	hr := holder.wait()
	if holder.hung {
		t.Fatal("the claimer hung after its session was killed")
	}
	cleanFailure(t, "claimer whose session was killed", hr)
	if !strings.Contains(hr.stderr, "no request is left pending") || requestIDRE.MatchString(hr.stderr) {
		t.Errorf("the claimer's failure should say that nothing is left pending, and name no request to recheck:\n%s", hr.stderr)
	}
	if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ?", id); n != 0 {
		t.Fatalf("%d requests recorded after the claimer's session was killed, want 0 (logged in the claim, rolled back with it)", n)
	}
	if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ?", id); n != 0 {
		t.Fatalf("%d work rows after the claimer's session was killed, want 0", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for sourceRowLocked(t, context.Background(), d, e) || testdb.TransactionsOpen(t, d, e.DB) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("loan rows still locked 10 s after the claimer's session was killed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	testdb.Exec(t, d, e.DB, "UPDATE loanq_task SET query_delay_ms = 0 WHERE id = ?", id)
	task := "cut-" + string(drivers.Rows)
	r := mustOK(t, dsn, "doomed", append([]string{"--output", "json", "work", "get", task, "--count", "2"}, fastRecheck...)...)
	if got := decode(t, r); got.Status != "assigned" || len(got.Loans) != 2 || got.User != "doomed" {
		t.Fatalf("the claimer asking again: %+v", got)
	}
	if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ?", id); n != 2 {
		t.Fatalf("%d work rows, want 2", n)
	}
	if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ?", id); n != 1 {
		t.Fatalf("%d requests, want 1 (the one asked again)", n)
	}
	audit(t, e)
}

// killHolderSession finds the one loanq session of this database that sits
// idle inside a transaction — the holder in its criteria query — and kills
// it from another session. It returns the session id. For the lease, whose
// holder has no transaction open, it kills the idle loanq sessions of the
// test's database other than its own (the holder's pooled connection among
// them; the test's other pooled connections reconnect).
func killHolderSession(t *testing.T, d drivers.Driver, db *sql.DB, s drivers.Strategy) int64 {
	t.Helper()
	if s == drivers.Lease {
		return killIdleSessions(t, d, db)
	}
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
		testdb.FreshInnoDBTrx(func() { ids = sessionIDs(t, db, find) }) // MySQL's find reads innodb_trx
		if len(ids) == 1 {
			killSession(t, d, db, ids[0])
			return ids[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("found %d sessions idle in a transaction, want exactly the holder's", len(ids))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func killIdleSessions(t *testing.T, d drivers.Driver, db *sql.DB) int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx) // one session: finds the others and kills them
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	find := map[string]string{
		"postgres": `SELECT pid FROM pg_stat_activity
WHERE datname = current_database() AND application_name = 'loanq' AND state = 'idle' AND pid <> pg_backend_pid()`,
		"mysql": `SELECT ID FROM information_schema.processlist
WHERE DB = DATABASE() AND COMMAND = 'Sleep' AND ID <> CONNECTION_ID()`,
	}[d.Name()]
	ids := sessionIDs(t, conn, find)
	if len(ids) == 0 {
		t.Fatal("found no idle session of the lease holder")
	}
	for _, id := range ids {
		killSession(t, d, conn, id)
	}
	return ids[0]
}

// sessionIDs runs find, a query of session ids.
func sessionIDs(t *testing.T, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, find string) []int64 {
	t.Helper()
	rows, err := q.QueryContext(context.Background(), find)
	if err != nil {
		t.Fatalf("finding sessions: %v", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// killSession ends one session of the test's own database from another.
func killSession(t *testing.T, d drivers.Driver, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, id int64) {
	t.Helper()
	kill := map[string]string{"postgres": fmt.Sprintf("SELECT pg_terminate_backend(%d)", id), "mysql": fmt.Sprintf("KILL %d", id)}[d.Name()]
	if _, err := q.ExecContext(context.Background(), kill); err != nil {
		t.Fatalf("%s: %v", kill, err)
	}
}
