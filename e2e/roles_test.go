package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"github.com/loanq/loanq/roles"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// The roles `loanq grants` prints are what the
// database enforces. Each account is created from that output, then every
// command is run as each role, and what a role may not do is also sent as
// hand-written SQL through its own connection: the database must refuse it.
func TestRolesEnforcedByTheDatabase(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"postgres", "mysql"} {
		t.Run(dialect, func(t *testing.T) { rolesSuite(t, dialect) })
		t.Run(dialect+"/by-hand", func(t *testing.T) { byHandSuite(t, dialect) })
	}
}

// SQLite has no accounts: grants says so (exit 2), and any --user acts.
func TestRolesSQLite(t *testing.T) {
	t.Parallel()
	dsn := testdb.Fresh(t, "sqlite")
	r := runAs(t, dsn, "", 2, "grants", "--role", "processor", "--to", "ana")
	if !strings.Contains(r.stderr, "no database accounts") {
		t.Errorf("grants on SQLite: %q", r.stderr)
	}
	runAs(t, dsn, "", 0, "migrate", "up")
	runAs(t, dsn, "anyone", 0, "pipeline")
}

func rolesSuite(t *testing.T, dialect string) {
	owner := testdb.Fresh(t, dialect)
	d, db := testdb.Migrated(t, owner)
	testdb.CreateLoans(t, d, db, 60)
	mustOK(t, owner, "admin0", "task", "create", "skip-t", "--where", "eligible = 1", "--order", "priority DESC")
	mustOK(t, owner, "admin0", "task", "create", "rows-t", "--where", "eligible = 1", "--order", "priority DESC", "--lock", "rows", "--max-active", "2",
		"--allow-wide-locks") // priority DESC, id: the (eligible, priority, id) index cannot serve it on InnoDB (docs/mysql.md)
	mustOK(t, owner, "admin0", "task", "create", "lease-t", "--where", "eligible = 1", "--order", "priority", "--lock", "lease")
	mustOK(t, owner, "admin0", "task", "create", "hold-t", "--where", "eligible = 1", "--max-hold", "1s")
	mustOK(t, owner, "admin0", "task", "create", "pool-t", "--where", "eligible = 1", "--prefetch", "10", "--max-active", "5")
	mustOK(t, owner, "admin0", "task", "create", "run-t", "--where", "eligible = 1 AND id <= 12") // work run until empty

	acc := newAccounts(t, dialect, owner, d, db)
	proc := acc.create("processor", "proc", "ana") // acts as ana
	bobAcct := acc.create("processor", "bob", "")  // acts as its own name
	bob := acc.name("bob")
	sup := acc.create("supervisor", "sup", "")
	dash := acc.create("dashboard", "dash", "")
	adm := acc.create("admin", "adm", "")

	// --- a processor does its own work, on every strategy, without --user.
	got := decode(t, runAs(t, proc, "", 0, "-o", "json", "work", "get", "skip-t", "--count", "2"))
	if got.User != "ana" || got.Status != "assigned" || len(got.Loans) != 2 {
		t.Fatalf("processor's work get: %+v, want 2 loans for ana (its mapped name)", got)
	}
	runAs(t, proc, "", 0, "work", "status", itoa64(got.RequestID))
	runAs(t, proc, "", 0, "disposition", "skip-t", itoa64(got.Loans[0]), "complete")
	rows := decode(t, runAs(t, proc, "", 0, "-o", "json", "work", "get", "rows-t", "--count", "3"))
	if rows.Assigned != 2 || rows.Status != "partial" {
		t.Fatalf("capped rows task: %+v, want 2 of 3 (cap 2)", rows)
	}
	runAs(t, proc, "", 0, "disposition", "rows-t", itoa64(rows.Loans[0]), "never")
	runAs(t, proc, "", 0, "disposition", "rows-t", itoa64(rows.Loans[1]), "return", "--after", "1h")
	runAs(t, proc, "", 0, "work", "get", "lease-t", "--count", "1")
	runAs(t, proc, "", 0, "work", "get", "hold-t", "--count", "1")
	runAs(t, proc, "", 0, "work", "get", "pool-t", "--count", "1") // a round, which fills the pool
	pooled := decode(t, runAs(t, proc, "", 0, "-o", "json", "work", "get", "pool-t", "--count", "2"))
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work_request WHERE id = ? AND pooled = 1", pooled.RequestID); n != 1 || pooled.Assigned != 2 {
		t.Errorf("a processor's get from the pool: %+v, pooled %d", pooled, n)
	}
	runAs(t, proc, "ana", 0, "pipeline")
	// Named locks are for farm jobs, not a person's account (docs/security.md).
	if r := runAs(t, proc, "", 2, "lock", "run", "nightly", "--", "true"); !strings.Contains(r.stderr, "refused by the database") {
		t.Errorf("processor's lock run: %q, want it refused by the database", r.stderr)
	}
	// Every lock strategy a call may ask for, the list of its work, and the
	// loop for scripts until the task is empty.
	if nw := decode(t, runAs(t, proc, "", 0, "-o", "json", "work", "get", "skip-t", "--lock", "nowait")); nw.User != "ana" || nw.Assigned != 1 {
		t.Errorf("processor's work get --lock nowait: %+v, want 1 loan for ana", nw)
	}
	if r := runAs(t, proc, "", 0, "work", "list"); !strings.Contains(r.stdout, "skip-t") {
		t.Errorf("processor's work list does not show its skip-t work:\n%s", r.stdout)
	}
	// `true` completes a loan, which leaves it matching the criteria (work
	// run stops such a loop after 3 repeats): --max-loans bounds it. Exit 65
	// disposes of a loan as never, so --until-empty ends.
	runAs(t, proc, "", 0, "work", "run", "skip-t", "--max-loans", "2", "--", "true")
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id WHERE t.name = 'skip-t' AND w.user_name = 'ana' AND w.disposition = 'complete'"); n != 3 {
		t.Errorf("processor's work run -- true: %d skip-t loans complete, want 3 (1 by disposition, 2 by work run)", n)
	}
	runAs(t, proc, "", 0, "work", "run", "run-t", "--until-empty", "--", "sh", "-c", "exit 65")
	eligible := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loan WHERE eligible = 1 AND id <= 12")
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id WHERE t.name = 'run-t' AND w.user_name = 'ana' AND w.disposition = 'never'"); n != eligible || n == 0 {
		t.Errorf("processor's work run --until-empty: %d loans disposed of as never, want all %d eligible", n, eligible)
	}
	bobGot := decode(t, runAs(t, bobAcct, "", 0, "-o", "json", "work", "get", "skip-t", "--count", "2"))
	if bobGot.User != bob || len(bobGot.Loans) != 2 {
		t.Fatalf("second processor: %+v, want 2 loans for %s", bobGot, bob)
	}
	// Several loans in one disposition: one of bob's among ana's refuses
	// the whole batch (exit 2, nothing changed); ana's alone are hers to end.
	anaTwo := decode(t, runAs(t, proc, "", 0, "-o", "json", "work", "get", "skip-t", "--count", "2"))
	if r := runAs(t, proc, "", 2, "disposition", "skip-t", itoa64(anaTwo.Loans[0]), itoa64(anaTwo.Loans[1]), itoa64(bobGot.Loans[0]), "complete"); !strings.Contains(r.stderr, "is assigned to "+bob) {
		t.Errorf("processor's batch with another's loan: %q, want it refused naming %s", r.stderr, bob)
	}
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id WHERE t.name = 'skip-t' AND w.loan_id IN (?, ?) AND w.user_name = 'ana' AND w.disposition IS NULL", itoa64(anaTwo.Loans[0]), itoa64(anaTwo.Loans[1])); n != 2 {
		t.Errorf("a refused batch ended %d of ana's loans", 2-n)
	}
	runAs(t, proc, "", 0, "disposition", "skip-t", itoa64(anaTwo.Loans[0]), itoa64(anaTwo.Loans[1]), "complete")

	// A pending request of ana's, logged by hand through her account (allowed),
	// then cancelled with the command.
	procDB := acc.open(proc)
	taskID := testdb.Int(t, d, db, "SELECT id FROM loanq_task WHERE name = 'lease-t'")
	anaPending := insertRequest(t, d, procDB, taskID, "ana")
	if anaPending == 0 {
		t.Fatal("a processor could not log its own request by hand")
	}
	runAs(t, proc, "", 0, "work", "cancel", itoa64(anaPending))

	// --- what it may not do, through the command line: exit 2, nothing changed.
	for _, c := range []struct {
		user string
		args []string
		want string
	}{
		{"mallory", []string{"work", "get", "skip-t"}, "may not act as"},
		{bob, []string{"disposition", "skip-t", itoa64(bobGot.Loans[0]), "never"}, "may not act as"},
		{"", []string{"task", "update", "skip-t", "--where", "1 = 1"}, "refused by the database"},
		{"", []string{"task", "create", "mine", "--where", "1 = 1"}, "refused by the database"},
		{"", []string{"work", "reclaim", "skip-t", "--of", bob}, "refused by the database"},
	} {
		r := runAs(t, proc, c.user, 2, c.args...)
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("processor %v: stderr %q, want it to say %q", c.args, r.stderr, c.want)
		}
	}

	// --- the same by hand: the database refuses every one.
	skipID := testdb.Int(t, d, db, "SELECT id FROM loanq_task WHERE name = 'skip-t'")
	bobPending := insertRequest(t, d, acc.open(bobAcct), taskID, bob)
	anaReq := testdb.Int(t, d, db, "SELECT MIN(id) FROM loanq_work_request WHERE user_name = 'ana'")
	now := map[string]string{"postgres": "clock_timestamp()", "mysql": "UTC_TIMESTAMP(6)"}[dialect]
	refused := []struct {
		what, query string
		args        []any
	}{
		{"rewrite a task's criteria", "UPDATE loanq_task SET criteria = '1 = 1' WHERE id = ?", []any{skipID}},
		{"claim a task as its creator", "UPDATE loanq_task SET created_by = 'ana' WHERE id = ?", []any{skipID}},
		{"log a request as someone else", "INSERT INTO loanq_work_request (task_id, user_name, requested, assigned, status, created_at) VALUES (?, ?, 1, 0, 'pending', " + now + ")", []any{taskID, bob}},
		{"end someone else's work", "UPDATE loanq_work SET disposition = 'never', disposed_at = " + now + " WHERE user_name = ? AND disposition IS NULL", []any{bob}},
		{"end someone else's work as a batch disposition does", "UPDATE loanq_work SET disposition = 'complete', disposed_at = " + now + " WHERE task_id = ? AND user_name = ? AND disposition IS NULL AND loan_id IN (?, ?)",
			[]any{skipID, bob, itoa64(bobGot.Loans[0]), itoa64(bobGot.Loans[1])}},
		{"reclaim someone else's work", "UPDATE loanq_work SET disposition = 'reclaimed', disposed_at = " + now + ", disposed_by = 'ana' WHERE user_name = ? AND disposition IS NULL", []any{bob}},
		{"take someone else's work over", "UPDATE loanq_work SET user_name = 'ana' WHERE user_name = ?", []any{bob}},
		{"cancel someone else's request", "UPDATE loanq_work_request SET status = 'cancelled', served_at = " + now + " WHERE id = ?", []any{bobPending}},
		{"keep someone else's request alive", "UPDATE loanq_work_request SET alive_at = " + now + " WHERE id = ?", []any{bobPending}},
		{"expire someone else's live request", "UPDATE loanq_work_request SET status = 'expired', served_at = " + now + " WHERE id = ?", []any{bobPending}},
		{"assign work to someone else's request", "INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at) VALUES (?, 59, ?, ?, " + now + ")", []any{skipID, bob, anaReq}},
		{"delete history", "DELETE FROM loanq_work WHERE user_name = ?", []any{bob}},
		{"change a loan", "UPDATE loan SET id = id WHERE id = 1", nil},
		{"mark itself trusted", "UPDATE loanq_account SET trusted = TRUE", nil},
	}
	for _, r := range refused {
		_, err := procDB.ExecContext(context.Background(), testdb.Rebind(d, r.query), r.args...)
		if err == nil {
			t.Errorf("a processor could %s by hand", r.what)
		} else if !drivers.IsPermissionDenied(err) {
			t.Errorf("%s: refused with %v, want the database's permission refusal", r.what, err)
		}
	}
	if dialect == "postgres" {
		// Every account may create temporary tables, and pg_temp comes first
		// in an unpinned search_path: a temporary loanq_account must not
		// stand in for the real one.
		conn, err := procDB.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, q := range []string{
			"CREATE TEMP TABLE loanq_account (account TEXT, user_name TEXT, trusted BOOLEAN)",
			"INSERT INTO loanq_account VALUES (current_user, NULL, TRUE)",
		} {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		_, err = conn.ExecContext(ctx, "INSERT INTO loanq_work_request (task_id, user_name, requested, assigned, status, created_at) VALUES ($1, $2, 1, 0, 'pending', clock_timestamp())", taskID, bob)
		if err == nil || !drivers.IsPermissionDenied(err) {
			t.Errorf("with a temporary loanq_account, a request as someone else: %v, want a refusal", err)
		}
		conn.Close()
	}
	// The final state: bob's work and request untouched, the task as defined.
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE user_name = ? AND disposition IS NULL", bob); n != 2 {
		t.Errorf("bob's active work: %d rows, want 2", n)
	}
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work_request WHERE id = ? AND status = 'pending'", bobPending); n != 1 {
		t.Errorf("bob's pending request was changed")
	}
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_task WHERE criteria = 'eligible = 1' AND created_by = 'admin0'"); n != 5 {
		t.Errorf("%d of 5 tasks as defined", n)
	}

	// --- abandoned requests (docs/algorithm.md): a processor's recheck
	// renews its own request's sign of life; any processor ends someone
	// else's request as expired once it is past the bound, and only then.
	anaWaiting := insertRequest(t, d, procDB, taskID, "ana")
	runAs(t, proc, "", 0, "work", "status", itoa64(anaWaiting)) // a sign of life, then served (bob's too)
	bobGone := insertRequest(t, d, acc.open(bobAcct), taskID, bob)
	if err := testdb.AgeRequest(d, db, bobGone, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Statements().RequestsExpire.Exec(context.Background(), procDB, engineio.TaskParams{TaskID: taskID}); err != nil {
		t.Errorf("a processor ending an abandoned request of someone else: %v", err)
	}
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work_request WHERE id = ? AND status = 'expired'", bobGone); n != 1 {
		t.Errorf("bob's abandoned request was not ended as expired by ana's account")
	}

	// --- max hold: any processor's round may expire anyone's work once it
	// is older than the task's max hold (and only then).
	time.Sleep(1200 * time.Millisecond)
	runAs(t, bobAcct, "", 0, "work", "get", "hold-t", "--count", "1")
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id WHERE t.name = 'hold-t' AND w.user_name = 'ana' AND w.disposition = 'expired'"); n != 1 {
		t.Errorf("ana's work past the max hold: %d expired by bob's round, want 1", n)
	}

	// --- a supervisor may act for others and run farm jobs; a dashboard only reads; an admin defines tasks.
	runAs(t, sup, bob, 0, "pipeline")
	runAs(t, sup, "", 0, "lock", "run", "nightly", "--", "true")
	runAs(t, sup, "sue", 0, "work", "reclaim", "skip-t", "--of", bob)
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE user_name = ? AND disposition = 'reclaimed' AND disposed_by = 'sue'", bob); n != 2 {
		t.Errorf("supervisor's reclaim: %d of bob's 2 loans reclaimed and recorded as by the supervisor", n)
	}
	runAs(t, dash, "", 0, "task", "list")
	runAs(t, dash, "", 0, "work", "list")
	if r := runAs(t, dash, "", 2, "work", "get", "skip-t"); !strings.Contains(r.stderr, "refused by the database") {
		t.Errorf("dashboard work get: %q", r.stderr)
	}
	// --- a refresher refills candidate pools, and only that: no task
	// definitions, no tokens, no acting for others.
	refresher := acc.create("refresher", "refill", "")
	poolID := testdb.Int(t, d, db, "SELECT id FROM loanq_task WHERE name = 'pool-t'")
	testdb.Exec(t, d, db, "DELETE FROM loanq_pool WHERE task_id = "+itoa64(poolID))
	runAs(t, refresher, "", 0, "task", "refill", "pool-t")
	runAs(t, refresher, "", 0, "lock", "run", "refill", "--", "true") // a refill loop on one node of a farm
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_pool WHERE task_id = ?", poolID); n == 0 {
		t.Errorf("the refresher's task refill left pool-t's pool empty")
	}
	for _, args := range [][]string{
		{"task", "update", "pool-t", "--where", "1 = 1"},
		{"task", "create", "refill-mine", "--where", "1 = 1"},
		{"token", "create", "--user", "x"},
		{"work", "reclaim", "skip-t", "--of", "ana"},
	} {
		if r := runAs(t, refresher, "", 2, args...); !strings.Contains(r.stderr, "refused by the database") {
			t.Errorf("refresher %v: %q, want it refused by the database", args, r.stderr)
		}
	}
	if _, err := acc.open(refresher).ExecContext(context.Background(), "UPDATE loanq_task SET criteria = '1 = 1'"); err == nil || !drivers.IsPermissionDenied(err) {
		t.Errorf("a refresher rewriting criteria by hand: %v, want the database's refusal", err)
	}

	// --- a dashboard account runs serve: figures, and the backlog counted
	// through its SELECT on the source.
	srv := startServe(t, dash)
	var snap struct {
		Tasks []struct {
			Name         string `json:"name"`
			Active       int    `json:"active"`
			BacklogLoans *int64 `json:"backlog_loans"`
		} `json:"tasks"`
		TotalActive int `json:"total_active"`
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, body := srv.get(t, "/api/dashboard")
		if resp.StatusCode != 200 {
			t.Fatalf("dashboard account's serve: /api/dashboard %d: %s", resp.StatusCode, body)
		}
		if err := json.Unmarshal([]byte(body), &snap); err != nil {
			t.Fatalf("/api/dashboard: %v: %s", err, body)
		}
		counted := len(snap.Tasks) > 0
		for _, tk := range snap.Tasks {
			counted = counted && tk.BacklogLoans != nil
		}
		if counted || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(snap.Tasks) != 6 || snap.TotalActive == 0 {
		t.Errorf("dashboard account's /api/dashboard: %d tasks, %d active, want 6 tasks with work", len(snap.Tasks), snap.TotalActive)
	}
	for _, tk := range snap.Tasks {
		if tk.BacklogLoans == nil {
			t.Errorf("dashboard account's serve: no backlog for %s (the count refused?); stderr:\n%s", tk.Name, srv.stderr.String())
		}
	}
	srv.stop(t)

	// Ordered by id, which the (eligible, priority, id) index cannot serve:
	// InnoDB sorts and its claim locks every eligible row (docs/mysql.md).
	runAs(t, adm, "", 0, "task", "create", "adm-t", "--where", "eligible = 1", "--lock", "rows", "--allow-wide-locks")
	runAs(t, adm, "alice", 0, "task", "update", "skip-t", "--max-active", "5")
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_task WHERE name = 'skip-t' AND updated_by = 'alice' AND updated_at IS NOT NULL"); n != 1 {
		t.Errorf("task update by the admin is not recorded as theirs")
	}
	runAs(t, adm, "", 0, "--user", "ana", "work", "get", "adm-t")

	// --- a re-grant replaces the role: an admin made a processor keeps
	// nothing of the admin's, on loanq's tables (loanq_api_token among
	// them: an admin's INSERT there mints tokens) nor on the source.
	demoted := acc.create("admin", "demoted", "")
	runAs(t, demoted, "", 0, "token", "create", "--user", "x", "--role", "supervisor")
	acc.grant("processor", "demoted", "")
	if r := runAs(t, demoted, "", 2, "token", "create", "--user", "x", "--role", "supervisor"); !strings.Contains(r.stderr, "refused by the database") {
		t.Errorf("token create by an admin re-granted as processor: %q, want it refused by the database", r.stderr)
	}
	demotedDB := acc.open(demoted)
	for _, r := range []struct{ what, query string }{
		{"mint a supervisor token", "INSERT INTO loanq_api_token (user_name, role, token_hash, created_by, created_at) VALUES ('x', 'supervisor', '" + strings.Repeat("ab", 32) + "', 'x', " + now + ")"},
		{"revoke tokens", "UPDATE loanq_api_token SET revoked_at = " + now},
		{"change a task", "UPDATE loanq_task SET criteria = '1 = 1'"},
		{"delete history", "DELETE FROM loanq_query_run"},
	} {
		_, err := demotedDB.ExecContext(context.Background(), r.query)
		if err == nil {
			t.Errorf("an admin re-granted as processor could %s by hand", r.what)
		} else if !drivers.IsPermissionDenied(err) {
			t.Errorf("re-granted admin, %s: refused with %v, want the database's permission refusal", r.what, err)
		}
	}
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_api_token"); n != 1 {
		t.Errorf("%d tokens, want the 1 made before the re-grant", n)
	}

	// --- prune is an admin's: DELETE on the history is the admin role's only.
	old := d.Dialect().NowMinusMillis("17280000000") // 200 days
	testdb.Exec(t, d, db, "UPDATE loanq_work_request SET created_at = "+old+", served_at = "+old+" WHERE status <> 'pending'")
	testdb.Exec(t, d, db, "UPDATE loanq_work SET assigned_at = "+old+", disposed_at = "+old+" WHERE disposition IS NOT NULL")
	before := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work_request")
	if r := runAs(t, proc, "", 2, "prune"); r.stdout != "" || !strings.Contains(r.stderr, "refused by the database") {
		t.Errorf("a processor's prune printed %q, %q; want it refused by the database", r.stdout, r.stderr)
	}
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work_request"); n != before {
		t.Errorf("a processor's prune removed %d requests", before-n)
	}
	runAs(t, adm, "", 0, "prune")
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work_request"); n >= before {
		t.Errorf("the admin's prune removed nothing (%d requests before, %d after)", before, n)
	}
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE disposition = 'never'"); n != 1+eligible {
		t.Errorf("after the admin's prune %d never rows, want the %d (rows-t's and run-t's)", n, 1+eligible)
	}
}

// accounts creates database accounts for one test and drops them after.
type accounts struct {
	t        *testing.T
	dialect  string
	owner    string
	d        drivers.Driver
	db       *sql.DB
	prefix   string
	accounts []string
}

func newAccounts(t *testing.T, dialect, owner string, d drivers.Driver, db *sql.DB) *accounts {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return &accounts{t: t, dialect: dialect, owner: owner, d: d, db: db, prefix: "lq" + hex.EncodeToString(b[:]) + "_"}
}

func (a *accounts) name(short string) string { return a.prefix + short }

// create makes an account, gives it a role from `loanq grants`' output, and
// returns its DSN.
func (a *accounts) create(role, short, as string) string {
	t := a.t
	t.Helper()
	name := a.name(short)
	ctx := context.Background()
	var create, drop []string
	switch a.dialect {
	case "postgres":
		create = []string{"CREATE ROLE " + name + " LOGIN"}
		drop = []string{"DROP OWNED BY " + name, "DROP ROLE " + name}
	case "mysql":
		create = []string{"CREATE USER '" + name + "'@'%'"}
		drop = []string{"DROP USER '" + name + "'@'%'"}
	}
	for _, q := range create {
		if _, err := a.db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		for _, q := range drop {
			if _, err := a.db.ExecContext(context.Background(), q); err != nil {
				t.Logf("%s: %v", q, err)
			}
		}
	})
	a.grant(role, short, as)
	u, err := url.Parse(a.owner)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(name)
	if a.dialect == "mysql" {
		u.User = url.UserPassword(name, "")
	}
	return u.String()
}

// grant runs `loanq grants --role role` for an account, as the owner: for
// an account made by create, a re-grant with another role.
func (a *accounts) grant(role, short, as string) {
	t := a.t
	t.Helper()
	args := []string{"grants", "--role", role, "--to", a.name(short), "--source", "loan", "--dialect", a.dialect}
	if as != "" {
		args = append(args, "--as", as)
	}
	out := runAs(t, a.owner, "", 0, args...)
	for _, stmt := range splitScript(out.stdout) {
		if _, err := a.db.ExecContext(context.Background(), stmt); err != nil {
			t.Fatalf("running `loanq %s` output: %s: %v", strings.Join(args, " "), stmt, err)
		}
	}
}

func (a *accounts) open(dsn string) *sql.DB {
	a.t.Helper()
	_, db, _, err := drivers.Connect(context.Background(), dsn)
	if err != nil {
		a.t.Fatalf("connecting as %s: %v", dsn, err)
	}
	a.t.Cleanup(func() { db.Close() })
	return db
}

// splitScript cuts `loanq grants` output into statements: comment lines
// dropped, a statement ends with ';' at the end of a line.
func splitScript(s string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") || strings.TrimSpace(line) == "" {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(strings.TrimSpace(line), ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	return out
}

// insertRequest logs a pending request by hand and returns its id (0 when refused).
func insertRequest(t *testing.T, d drivers.Driver, db *sql.DB, taskID int64, user string) int64 {
	t.Helper()
	id, err := d.Statements().RequestInsert.InsertID(context.Background(), db, engineio.RequestInsertParams{TaskID: taskID, User: user, Requested: 1})
	if err != nil {
		t.Fatalf("logging a request for %s by hand: %v", user, err)
	}
	return id
}

// runAs runs loanq with --db dsn, --user user when not "", and no LOANQ_*
// variable, and checks its exit code.
func runAs(t *testing.T, dsn, user string, want int, args ...string) result {
	t.Helper()
	full := []string{"--db", dsn}
	if user != "" {
		full = append(full, "--user", user)
	}
	full = append(full, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, full...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOANQ_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Dir = os.TempDir()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running loanq %v: %v", args, err)
	}
	if r.code != want {
		t.Fatalf("loanq %v: exit %d, want %d\n%s%s", args, r.code, want, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic:") {
		t.Fatalf("loanq %v printed a stack trace:\n%s", args, r.stderr)
	}
	return r
}

// docs/security.md shows what `loanq grants` prints for every role on
// PostgreSQL and MySQL/MariaDB, exactly: each block is the first ```sql block
// after its command line, and no other block is on the page.
func TestSecurityDocShowsGrantsOutput(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	accounts := map[roles.Role][]string{
		roles.Admin:      {"--to", "loanq_admin"},
		roles.Processor:  {"--to", "proc_ana", "--as", "ana"},
		roles.Supervisor: {"--to", "team_lead"},
		roles.Dashboard:  {"--to", "loanq_dash"},
		roles.Refresher:  {"--to", "loanq_refill"},
		roles.Serve:      {"--to", "loanq_serve"},
	}
	dsn := "sqlite:" + t.TempDir() + "/x.db"
	blocks := 0
	for _, role := range roles.All {
		for _, dialect := range []string{"postgres", "mysql"} {
			args := append(append([]string{"grants", "--role", string(role)}, accounts[role]...), "--source", "loan", "--dialect", dialect)
			line := "loanq " + strings.Join(args, " ")
			out := runAs(t, dsn, "", 0, args...).stdout
			at := strings.Index(doc, line)
			if at < 0 {
				t.Errorf("docs/security.md does not show `%s`; it prints:\n%s", line, out)
				continue
			}
			rest := doc[at:]
			start := strings.Index(rest, "```sql\n")
			if start < 0 {
				t.Errorf("docs/security.md: no ```sql block after `%s`", line)
				continue
			}
			block := rest[start+len("```sql\n"):]
			if end := strings.Index(block, "```"); end >= 0 {
				block = block[:end]
			}
			blocks++
			if block != out {
				t.Errorf("docs/security.md: the block after `%s` is not what it prints now:\n%s", line, out)
			}
		}
	}
	if n := strings.Count(doc, "```sql\n"); n != blocks {
		t.Errorf("docs/security.md has %d ```sql blocks, %d of them checked against `loanq grants`", n, blocks)
	}
}
