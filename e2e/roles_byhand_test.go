package e2e

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/namedlock"
)

var errChangedNothing = errors.New("the statement changed no row")

// byHandSuite sends, through a processor's (and a supervisor's) own
// connection, hand-written SQL (docs/security.md, "What the database enforces"): work written in another's
// name or past what a request asked for, rewritten history, other people's
// named locks, a pool row that would stop a task, a key that does not fit.
// The same table runs on PostgreSQL and MariaDB; every row must be refused
// by the database (or, where a value is the database's to set, be set by
// it whatever the statement wrote). docs/security.md lists each rule.
func byHandSuite(t *testing.T, dialect string) {
	ctx := context.Background()
	owner := testdb.Fresh(t, dialect)
	d, db := testdb.Migrated(t, owner)
	testdb.CreateLoans(t, d, db, 60)
	mustOK(t, owner, "admin0", "task", "create", "skip-t", "--where", "eligible = 1", "--order", "priority DESC", "--max-active", "3")
	mustOK(t, owner, "admin0", "task", "create", "pf", "--where", "eligible = 1", "--prefetch", "10")

	acc := newAccounts(t, dialect, owner, d, db)
	proc := acc.create("processor", "proc", "ana")
	bobAcct := acc.create("processor", "bob", "")
	bob := acc.name("bob")
	sup := acc.create("supervisor", "sup", "")
	adm := acc.create("admin", "adm", "")

	bobGot := decode(t, runAs(t, bobAcct, "", 0, "-o", "json", "work", "get", "skip-t", "--count", "2"))
	anaGot := decode(t, runAs(t, proc, "", 0, "-o", "json", "work", "get", "skip-t", "--count", "1"))
	if bobGot.Assigned != 2 || anaGot.Assigned != 1 {
		t.Fatalf("set-up: bob %+v, ana %+v", bobGot, anaGot)
	}
	runAs(t, proc, "", 0, "disposition", "skip-t", itoa64(anaGot.Loans[0]), "complete")
	skipID := testdb.Int(t, d, db, "SELECT id FROM loanq_task WHERE name = 'skip-t'")
	pfID := testdb.Int(t, d, db, "SELECT id FROM loanq_task WHERE name = 'pf'")
	anaDone := testdb.Int(t, d, db, "SELECT id FROM loanq_work WHERE request_id = ?", anaGot.RequestID)

	// Entitlements and four eyes (docs/governance.md): ana worked a loan in
	// maker; checker names maker with --not-worked-in and allows @seniors,
	// ana among them; closed allows carl only. Her pending request in
	// closed was logged by the owner (trusted) before carl was the only one.
	mustOK(t, owner, "admin0", "task", "create", "maker", "--where", "eligible = 1")
	mustOK(t, owner, "admin0", "task", "create", "checker", "--where", "eligible = 1", "--not-worked-in", "maker", "--allow", "@seniors")
	mustOK(t, owner, "admin0", "task", "create", "closed", "--where", "eligible = 1", "--allow", "carl")
	mustOK(t, owner, "admin0", "group", "add", "seniors", "ana")
	// task list, through ana's processor account: what she may work.
	if out := runAs(t, proc, "", 0, "task", "list").stdout; !strings.Contains(out, "checker") || strings.Contains(out, "closed") {
		t.Errorf("task list through ana's account lists closed (carl only) or not checker (@seniors):\n%s", out)
	}
	if out := runAs(t, adm, "", 0, "task", "list").stdout; !strings.Contains(out, "closed") {
		t.Errorf("task list through an admin's account does not list every task:\n%s", out)
	}
	makerGot := decode(t, runAs(t, proc, "", 0, "-o", "json", "work", "get", "maker", "--count", "1"))
	runAs(t, proc, "", 0, "disposition", "maker", itoa64(makerGot.Loans[0]), "complete")
	makerLoan := itoa64(makerGot.Loans[0])
	checkerID := testdb.Int(t, d, db, "SELECT id FROM loanq_task WHERE name = 'checker'")
	closedID := testdb.Int(t, d, db, "SELECT id FROM loanq_task WHERE name = 'closed'")
	closedReq, err := d.Statements().RequestInsert.InsertID(ctx, db, engineio.RequestInsertParams{TaskID: closedID, User: "ana", Requested: 1})
	if err != nil {
		t.Fatal(err)
	}
	// pendingIn logs a pending request of ana's in a task she may work.
	pendingIn := func(t *testing.T, tx *sql.Tx, task int64) int64 {
		t.Helper()
		id, err := d.Statements().RequestInsert.InsertID(ctx, tx, engineio.RequestInsertParams{TaskID: task, User: "ana", Requested: 2})
		if err != nil {
			t.Fatalf("ana logging a request by hand in a task she may work (through @seniors): %v", err)
		}
		return id
	}
	workIn := func(tx *sql.Tx, task int64, loan string, req int64) error {
		_, err := tx.ExecContext(ctx, testdb.Rebind(d, "INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at) VALUES (?, ?, 'ana', ?, "+d.Dialect().Now()+")"),
			task, loan, req)
		return err
	}

	now := d.Dialect().Now()
	longAgo := d.Dialect().NowMinusMillis("2592000000") // 30 days
	tenYears := d.Dialect().NowPlusMillis("315360000000")
	procDB, supDB, admDB := acc.open(proc), acc.open(sup), acc.open(adm)

	// pending logs a pending request of ana's in tx and returns its id.
	pending := func(t *testing.T, tx *sql.Tx, n int) int64 {
		t.Helper()
		id, err := d.Statements().RequestInsert.InsertID(ctx, tx, engineio.RequestInsertParams{TaskID: skipID, User: "ana", Requested: n})
		if err != nil {
			t.Fatalf("ana logging her own request by hand: %v", err)
		}
		return id
	}
	work := func(tx *sql.Tx, loan string, user string, req int64, at string) error {
		_, err := tx.ExecContext(ctx, testdb.Rebind(d, "INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at) VALUES (?, ?, ?, ?, "+at+")"),
			skipID, loan, user, req)
		return err
	}
	// exec runs one statement; one that changes no row (PostgreSQL's
	// row-level security hides a row its policy does not let one update)
	// changed nothing, which is a refusal too.
	exec := func(tx *sql.Tx, query string, args ...any) error {
		res, err := tx.ExecContext(ctx, testdb.Rebind(d, query), args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return errChangedNothing
		}
		return nil
	}

	// Locks: an admin's job holds nightly-export (taken through the admin's
	// account, as `lock run` does).
	admLocks := &namedlock.Store{DB: admDB, Driver: d}
	if lease, _, err := admLocks.Take(ctx, "nightly-export", "adm-host:1", 10*time.Minute); err != nil {
		t.Fatal(err)
	} else if lease == nil || lease.Token != 1 {
		t.Fatalf("the admin's take of nightly-export: %+v, want token 1", lease)
	}

	refused := []struct {
		row, what string
		db        *sql.DB
		do        func(t *testing.T, tx *sql.Tx) error
	}{
		{"1", "put loans in another user's long-served request", procDB, func(t *testing.T, tx *sql.Tx) error {
			return work(tx, "40", bob, bobGot.RequestID, longAgo)
		}},
		{"1", "put loans in its own served request", procDB, func(t *testing.T, tx *sql.Tx) error {
			return work(tx, "41", "ana", anaGot.RequestID, now)
		}},
		{"1", "write more work rows than its pending request asked for", procDB, func(t *testing.T, tx *sql.Tx) error {
			req := pending(t, tx, 1)
			if err := work(tx, "42", "ana", req, now); err != nil {
				t.Fatalf("the first row of a pending request of 1: %v", err)
			}
			return work(tx, "43", "ana", req, now)
		}},
		{"1", "hold more than the task's max-active (3)", procDB, func(t *testing.T, tx *sql.Tx) error {
			req := pending(t, tx, 5)
			for i, loan := range []string{"44", "45", "46"} {
				if err := work(tx, loan, "ana", req, now); err != nil {
					t.Fatalf("row %d of 3 within the cap: %v", i+1, err)
				}
			}
			return work(tx, "47", "ana", req, now)
		}},
		{"7e", "assign a text key in an integer-key task", procDB, func(t *testing.T, tx *sql.Tx) error {
			return work(tx, "abc", "ana", pending(t, tx, 1), now)
		}},
		{"2", "expire an admin's named lock and reset its token", procDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "UPDATE loanq_lock SET expires_at = "+longAgo+", token = 0 WHERE name = 'nightly-export'")
		}},
		{"2", "block a named lock for ten years", procDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "INSERT INTO loanq_lock (name, holder, token, taken_at, expires_at) VALUES ('nightly', 'mallory', 999, "+now+", "+tenYears+")")
		}},
		{"2", "(supervisor) expire an admin's lock and reset its token", supDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "UPDATE loanq_lock SET expires_at = "+longAgo+", token = 0 WHERE name = 'nightly-export'")
		}},
		{"2", "(supervisor) expire a lock it did not take", supDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "UPDATE loanq_lock SET expires_at = "+longAgo+" WHERE name = 'nightly-export'")
		}},
		{"2", "(supervisor) take a lock that is held", supDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "UPDATE loanq_lock SET holder = 'sup:1', token = token + 1 WHERE name = 'nightly-export'")
		}},
		{"2", "(supervisor) create a lock already taken, for ten years", supDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "INSERT INTO loanq_lock (name, holder, token, taken_at, expires_at) VALUES ('nightly', 'mallory', 999, "+now+", "+tenYears+")")
		}},
		{"2", "(supervisor) take a free lock for ten years", supDB, func(t *testing.T, tx *sql.Tx) error {
			if err := exec(tx, "INSERT INTO loanq_lock (name, token) VALUES ('nightly', 0)"); err != nil {
				t.Fatalf("creating a free lock: %v", err)
			}
			return exec(tx, "UPDATE loanq_lock SET holder = 'sup:1', token = token + 1, taken_at = "+now+", expires_at = "+tenYears+" WHERE name = 'nightly'")
		}},
		{"2", "hold a task's lease for ten years", procDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "UPDATE loanq_task SET lease_owner = 'x:1', lease_token = lease_token + 1, lease_expires_at = "+tenYears+" WHERE id = ?", skipID)
		}},
		{"2", "turn a task's lease token back", procDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "UPDATE loanq_task SET lease_token = lease_token - 1 WHERE id = ?", skipID)
		}},
		{"4", "put a key that does not parse in an integer task's pool", procDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "INSERT INTO loanq_pool (task_id, loan_id, pos, filled_at) VALUES (?, 'zz''); SELECT pg_sleep(5)--', -7, "+now+")", pfID)
		}},
		{"5", "turn its own complete into never", procDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "UPDATE loanq_work SET disposition = 'never' WHERE id = ?", anaDone)
		}},
		{"5", "make its own finished work active again", procDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "UPDATE loanq_work SET disposition = NULL, disposed_at = NULL WHERE id = ?", anaDone)
		}},
		{"5", "cancel its own served request", procDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "UPDATE loanq_work_request SET status = 'cancelled', served_at = "+now+" WHERE id = ?", anaGot.RequestID)
		}},
		{"8", "log a request in a task whose allow list leaves one out", procDB, func(t *testing.T, tx *sql.Tx) error {
			_, err := d.Statements().RequestInsert.InsertID(ctx, tx, engineio.RequestInsertParams{TaskID: closedID, User: "ana", Requested: 1})
			return err
		}},
		{"8", "assign itself a loan in a task whose allow list leaves one out", procDB, func(t *testing.T, tx *sql.Tx) error {
			return workIn(tx, closedID, "50", closedReq)
		}},
		{"8", "add itself to a group, to get into a task the group may work", procDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "INSERT INTO loanq_group (group_name, user_name, source, added_by) VALUES ('seniors', 'ana', 'admin', 'ana')")
		}},
		{"8", "put itself on a task's allow list", procDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "INSERT INTO loanq_task_allow (task_id, is_group, principal) VALUES (?, 0, 'ana')", closedID)
		}},
		{"8", "(four eyes) clear the rule of the task it checks", procDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "DELETE FROM loanq_task_not_worked_in WHERE task_id = ?", checkerID)
		}},
		{"8", "(four eyes) assign itself a loan it worked in the task the rule names", procDB, func(t *testing.T, tx *sql.Tx) error {
			req := pendingIn(t, tx, checkerID)
			if err := workIn(tx, checkerID, "51", req); err != nil {
				t.Fatalf("a loan ana never worked, in a task she may work: %v", err)
			}
			return workIn(tx, checkerID, makerLoan, req)
		}},
		{"9", "read the history's events (loanq history)", procDB, func(t *testing.T, tx *sql.Tx) error {
			var n int64
			return tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM loanq_history").Scan(&n)
		}},
		{"9", "write a history event by hand", procDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "INSERT INTO loanq_history (work_id, event, event_at) VALUES (?, 'disposed', "+now+")", anaDone)
		}},
		{"9", "(supervisor) write a history event by hand", supDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "INSERT INTO loanq_history (work_id, event, event_at) VALUES (?, 'disposed', "+now+")", anaDone)
		}},
		{"9", "(admin) rewrite a history event", admDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "UPDATE loanq_history SET event_at = "+longAgo+" WHERE work_id = ?", anaDone)
		}},
		{"9", "(supervisor) delete history events", supDB, func(t *testing.T, tx *sql.Tx) error {
			return exec(tx, "DELETE FROM loanq_history WHERE work_id = ?", anaDone)
		}},
		{"5", "finish a request with more than it asked for", procDB, func(t *testing.T, tx *sql.Tx) error {
			req := pending(t, tx, 1)
			return exec(tx, "UPDATE loanq_work_request SET status = 'assigned', assigned = 155, served_at = "+now+" WHERE id = ?", req)
		}},
	}
	for _, r := range refused {
		t.Run("row "+r.row+": "+r.what, func(t *testing.T) {
			tx, err := r.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			err = r.do(t, tx)
			if err == nil {
				t.Errorf("%s by hand was accepted", r.what)
			} else if !drivers.IsPermissionDenied(err) && !errors.Is(err, errChangedNothing) {
				t.Errorf("%s: %v, want the database's refusal", r.what, err)
			}
		})
	}

	// Row 9: the events of ana's work, written through her processor
	// account by the database's triggers (she has no privilege on
	// loanq_history); `loanq history` refuses her account with a clear
	// message and shows them to a supervisor.
	t.Run("row 9: processors' writes are recorded; the export is refused to them", func(t *testing.T) {
		if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_history WHERE work_id = ?", anaDone); n != 2 {
			t.Errorf("ana's work row %d has %d events, want its assignment and its disposition", anaDone, n)
		}
		r := runAs(t, proc, "", 2, "history", "--settle", "0s")
		if !strings.Contains(r.stderr, "may not read the history") || !strings.Contains(r.stderr, "loanq grants") || r.stdout != "" {
			t.Errorf("loanq history through a processor's account:\nstdout %q\nstderr %s", r.stdout, r.stderr)
		}
		out := runAs(t, sup, "", 0, "history", "--settle", "0s", "--output", "csv", "--task", "skip-t").stdout
		if !strings.Contains(out, ","+itoa64(anaDone)+",") || !strings.HasPrefix(out, "id,event,at,") {
			t.Errorf("loanq history through a supervisor's account lacks ana's work row %d:\n%s", anaDone, out)
		}
	})

	// What the database sets whatever the statement wrote: the clock for
	// assigned_at and created_at, the writing account for assigned_by.
	t.Run("row 1: assigned_at and assigned_by are the database's", func(t *testing.T) {
		tx, err := procDB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		req := pending(t, tx, 1)
		if err := work(tx, "48", "ana", req, longAgo); err != nil {
			t.Fatalf("a pending request's own work row: %v", err)
		}
		var by string
		var age int64
		if err := tx.QueryRowContext(ctx, testdb.Rebind(d, "SELECT assigned_by, "+d.Dialect().SecondsSince("assigned_at")+" FROM loanq_work WHERE request_id = ?"), req).Scan(&by, &age); err != nil {
			t.Fatal(err)
		}
		if by != acc.name("proc") || age > 60 {
			t.Errorf("a work row written 30 days back by hand: assigned_by %q, %d s old; want %q and the database's clock", by, age, acc.name("proc"))
		}
		var reqAge int64
		if err := tx.QueryRowContext(ctx, testdb.Rebind(d, "SELECT "+d.Dialect().SecondsSince("created_at")+" FROM loanq_work_request WHERE id = ?"), req).Scan(&reqAge); err != nil {
			t.Fatal(err)
		}
		if reqAge > 60 {
			t.Errorf("a request logged by hand is %d s old, want the database's clock", reqAge)
		}
	})
	t.Run("row 1: a backdated request gets the database's clock", func(t *testing.T) {
		tx, err := procDB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := exec(tx, "INSERT INTO loanq_work_request (task_id, user_name, requested, assigned, status, created_at, alive_at) VALUES (?, 'ana', 1, 0, 'pending', "+longAgo+", "+tenYears+")", skipID); err != nil {
			t.Fatalf("ana's own pending request: %v", err)
		}
		var created, alive int64
		if err := tx.QueryRowContext(ctx, testdb.Rebind(d, "SELECT "+d.Dialect().SecondsSince("created_at")+", "+d.Dialect().SecondsSince("alive_at")+" FROM loanq_work_request WHERE task_id = ? AND user_name = 'ana' AND status = 'pending'"), skipID).Scan(&created, &alive); err != nil {
			t.Fatal(err)
		}
		if created > 60 || alive < -60 {
			t.Errorf("a request logged 30 days back, alive for ten years: created %d s ago, alive %d s ago; want now for both", created, alive)
		}
	})

	if dialect == "mysql" {
		// Row 3: an account's loanq name is its user part, up to the LAST
		// '@'. 'adm@x'@'%' is not the admin, 'proc@evil'@'%' not ana's account.
		for _, name := range []string{acc.name("adm") + "@x", acc.name("proc") + "@evil"} {
			t.Run("row 3: "+name, func(t *testing.T) {
				u, err := url.Parse(owner)
				if err != nil {
					t.Fatal(err)
				}
				schema := strings.TrimPrefix(u.Path, "/")
				for _, q := range []string{
					"CREATE USER '" + name + "'@'%'",
					"GRANT SELECT, INSERT ON `" + schema + "`.loanq_work_request TO '" + name + "'@'%'",
					"GRANT SELECT ON `" + schema + "`.loanq_schema_version TO '" + name + "'@'%'",
				} {
					if _, err := db.ExecContext(ctx, q); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				}
				t.Cleanup(func() { db.ExecContext(context.Background(), "DROP USER '"+name+"'@'%'") })
				u.User = url.UserPassword(name, "")
				odd := acc.open(u.String())
				for _, who := range []string{bob, "ana"} {
					_, err := odd.ExecContext(ctx, "INSERT INTO loanq_work_request (task_id, user_name, requested, assigned, status, created_at) VALUES (?, ?, 1, 1, 'assigned', UTC_TIMESTAMP(6))", skipID, who)
					if err == nil {
						t.Errorf("account %s logged an assigned request for %s", name, who)
					} else if !drivers.IsPermissionDenied(err) {
						t.Errorf("account %s: %v, want the database's refusal", name, err)
					}
				}
			})
		}
	}

	if _, err := db.ExecContext(ctx, testdb.Rebind(d, "DELETE FROM loanq_work_request WHERE id = ?"), closedReq); err != nil {
		t.Fatal(err)
	}
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE user_name = 'ana' AND task_id IN (?, ?)", checkerID, closedID); n != 0 {
		t.Errorf("%d work rows of ana's in checker or closed written by hand", n)
	}

	// The final state: bob's request has its 2 rows, ana's completed work
	// stays complete, the admin's lock is the admin's, no lock 'nightly'.
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE request_id = ?", bobGot.RequestID); n != 2 {
		t.Errorf("bob's request has %d work rows, want its 2", n)
	}
	// Every work row records the account that wrote it: bob's get was
	// served by bob's own account.
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE request_id = ? AND assigned_by = ?", bobGot.RequestID, bob); n != 2 {
		t.Errorf("%d of bob's 2 work rows record bob's account as their writer (assigned_by)", n)
	}
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE id = ? AND disposition = 'complete'", anaDone); n != 1 {
		t.Errorf("ana's completed work was changed")
	}
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_lock WHERE name = 'nightly-export' AND holder = 'adm-host:1' AND token = 1"); n != 1 {
		t.Errorf("the admin's lock nightly-export is no longer the admin's with token 1")
	}
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_lock WHERE name = 'nightly'"); n != 0 {
		t.Errorf("a lock 'nightly' was created by hand")
	}
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work_request WHERE user_name = 'ana' AND status = 'pending'"); n != 0 {
		t.Errorf("%d pending requests of ana's left by the hand-written statements (all rolled back)", n)
	}
	// The admin's lock is released by the admin's account, token unchanged.
	if released, err := admLocks.Release(ctx, &namedlock.Lease{Name: "nightly-export", Holder: "adm-host:1", Token: 1}); err != nil {
		t.Errorf("the admin releasing its own lock: %v", err)
	} else if !released {
		t.Errorf("the admin's release changed no row")
	}
}
