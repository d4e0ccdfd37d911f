// Package drivertest is the conformance suite every loanq driver passes. It
// talks to a real server of the driver's kind: connection, migrations, the
// one-active-row constraint, the database clock, and the semantics of each
// lock statement the driver declares.
package drivertest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/schema"
)

// Exercise runs the whole suite against dsn, which must name an empty
// database (or schema) the suite may create and drop loanq tables in.
func Exercise(t *testing.T, d drivers.Driver, dsn string) {
	ctx := context.Background()
	_, parsed, err := drivers.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("ParseDSN: %v", err)
	}
	db, err := d.Open(ctx, parsed)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })

	t.Run("statements", func(t *testing.T) { statements(t, d) })
	t.Run("migrations", func(t *testing.T) { migrations(t, ctx, d, db) })
	t.Run("one active row per task and loan", func(t *testing.T) { oneActive(t, ctx, d, db) })
	t.Run("a round's loans in one statement", func(t *testing.T) { workInsertMany(t, ctx, d, db) })
	t.Run("database clock", func(t *testing.T) { clock(t, ctx, d, db) })
	t.Run("application tables", func(t *testing.T) { tables(t, ctx, d, db) })
	for _, s := range d.Capabilities().Strategies {
		if s == drivers.Lease {
			t.Run("lease", func(t *testing.T) { lease(t, ctx, d, db) })
			continue
		}
		if s == drivers.Rows {
			t.Run("rows", func(t *testing.T) { rows(t, ctx, d, db) })
			continue
		}
		t.Run("lock "+string(s), func(t *testing.T) { rowLock(t, ctx, d, db, s) })
	}
}

// tables: the driver's drivers.Tables make a table that takes what the demo
// writes into its sample table: every column type, several rows in one
// INSERT where the driver says it can, and times that sort as times.
func tables(t *testing.T, ctx context.Context, d drivers.Driver, db *sql.DB) {
	tb := d.Tables()
	ddl := fmt.Sprintf("CREATE TABLE loanq_t_tables (id %s PRIMARY KEY, label %s NOT NULL, prio %s NOT NULL, flag %s NOT NULL, created %s NOT NULL)%s",
		tb.BigInt, tb.TextOf(20), tb.SmallInt, tb.Flag, tb.Time, tb.Options)
	if _, err := db.ExecContext(ctx, ddl); err != nil {
		t.Fatalf("%s: %v", ddl, err)
	}
	defer db.ExecContext(ctx, "DROP TABLE loanq_t_tables")
	at := time.Date(2026, 1, 5, 17, 0, 0, 0, time.UTC)
	rows := [][]any{
		{int64(3), "third", 5, 1, tb.TimeArg(at.Add(-time.Hour))},
		{int64(1), "first", 1, 0, tb.TimeArg(at.Add(time.Hour))},
		{int64(2), "second", 3, 1, tb.TimeArg(at)},
	}
	one := "(?, ?, ?, ?, ?)"
	batch := 1
	if tb.MultiRowValues {
		batch = len(rows)
	}
	for i := 0; i < len(rows); i += batch {
		var args []any
		for _, r := range rows[i : i+batch] {
			args = append(args, r...)
		}
		q := "INSERT INTO loanq_t_tables (id, label, prio, flag, created) VALUES " + strings.TrimSuffix(strings.Repeat(one+", ", batch), ", ")
		if _, err := db.ExecContext(ctx, drivers.Rebind(d.Dialect(), q), args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	res, err := db.QueryContext(ctx, "SELECT id FROM loanq_t_tables WHERE flag = 1 ORDER BY created")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	var got []int64
	for res.Next() {
		var id int64
		if err := res.Scan(&id); err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[3 2]" {
		t.Errorf("flagged ids in time order: %v, want [3 2]", got)
	}
}

func statements(t *testing.T, d drivers.Driver) {
	// drivers.Build already refused missing statements, binds without a
	// parameter and statements that disagree with the capabilities, and
	// Register a driver whose interfaces disagree with them; this says it
	// again in the suite's own words.
	if err := drivers.CheckDriver(d); err != nil {
		t.Error(err)
	}
	st := d.Statements()
	for _, s := range d.Capabilities().Strategies {
		if s == drivers.Rows {
			if _, ok := d.(drivers.RowLocker); !ok {
				t.Errorf("strategy rows is declared but the driver is no drivers.RowLocker")
			}
			if st.UserLock.Empty() || st.UserLockEnsure.Empty() || st.WorkInsertRows.Empty() {
				t.Errorf("strategy rows is declared but UserLock, UserLockEnsure or WorkInsertRows is empty")
			}
			continue
		}
		if s != drivers.Lease && st.Lock(s).Empty() {
			t.Errorf("strategy %s is declared but its lock statement is empty", s)
		}
	}
}

func migrations(t *testing.T, ctx context.Context, d drivers.Driver, db *sql.DB) {
	if err := schema.Check(ctx, d, db, "test"); err == nil {
		t.Fatal("Check passed on an unmigrated database")
	}
	applied, err := schema.Up(ctx, d, db)
	if err != nil {
		t.Fatalf("migrate up: %v", err)
	}
	if len(applied) == 0 {
		t.Fatal("migrate up applied nothing on an empty database")
	}
	again, err := schema.Up(ctx, d, db)
	if err != nil || len(again) != 0 {
		t.Fatalf("second migrate up: applied %v, err %v; want nothing", again, err)
	}
	if err := schema.Check(ctx, d, db, "test"); err != nil {
		t.Fatalf("Check after up: %v", err)
	}
	if _, err := schema.Down(ctx, d, db); err != nil {
		t.Fatalf("migrate down: %v", err)
	}
	if err := schema.Check(ctx, d, db, "test"); err == nil {
		t.Fatal("Check passed after migrate down")
	}
	if _, err := schema.Up(ctx, d, db); err != nil {
		t.Fatalf("migrate up after down: %v", err)
	}
}

// fixture creates a task and a request and returns their ids.
func fixture(t *testing.T, ctx context.Context, d drivers.Driver, db *sql.DB, name string) (taskID, reqID int64) {
	st := d.Statements()
	var err error
	taskID, err = st.TaskInsert.InsertID(ctx, db, engineio.TaskInsertParams{Name: name, Source: "loan", Key: "id",
		Criteria: "1 = 1", LockStrategy: string(d.Capabilities().Strategies[0]), LeaseTTLMS: 60000, CreatedBy: "suite", KeyKind: "integer"})
	if err != nil {
		t.Fatalf("TaskInsert: %v", err)
	}
	reqID, err = st.RequestInsert.InsertID(ctx, db, engineio.RequestInsertParams{TaskID: taskID, User: "alice", Requested: 2})
	if err != nil {
		t.Fatalf("RequestInsert: %v", err)
	}
	return taskID, reqID
}

func oneActive(t *testing.T, ctx context.Context, d drivers.Driver, db *sql.DB) {
	st := d.Statements()
	taskID, reqID := fixture(t, ctx, d, db, "suite-active")
	const loan = "1099511627776" // 1 << 40: loan ids are text (migration 00013)
	assign := func(taskID, reqID int64, user string) error {
		_, err := st.WorkInsertMany.Exec(ctx, db, engineio.WorkInsertManyParams{TaskID: taskID, Assignments: fmt.Sprintf(`[[%q,%d,%q]]`, loan, reqID, user)})
		return err
	}
	bobReq, err := st.RequestInsert.InsertID(ctx, db, engineio.RequestInsertParams{TaskID: taskID, User: "bob", Requested: 1})
	if err != nil {
		t.Fatalf("RequestInsert: %v", err)
	}
	if err := assign(taskID, reqID, "alice"); err != nil {
		t.Fatalf("first active row: %v", err)
	}
	err = assign(taskID, bobReq, "bob")
	if err == nil {
		t.Fatal("the schema accepted a second active row for the same task and loan")
	}
	if !d.IsUniqueViolation(err) {
		t.Fatalf("second active row failed with %v; want a unique violation", err)
	}
	// Only the assignee ends it, once; then the row is history and no
	// longer collides.
	if w, err := st.ActiveWork.One(ctx, db, engineio.TaskLoanParams{TaskID: taskID, LoanID: loan}); err != nil || w.User != "alice" {
		t.Fatalf("ActiveWork: %v, %q", err, w.User)
	}
	for _, try := range []struct {
		user string
		want int64
	}{{"bob", 0}, {"alice", 1}, {"alice", 0}} {
		res, err := st.DisposeLoan.Exec(ctx, db, engineio.DisposeLoanParams{Disposition: "complete", TaskID: taskID, LoanID: loan, User: try.user})
		if err != nil {
			t.Fatalf("DisposeLoan by %s: %v", try.user, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != try.want {
			t.Fatalf("DisposeLoan by %s: %d rows (%v), want %d", try.user, n, err, try.want)
		}
	}
	if err := assign(taskID, bobReq, "bob"); err != nil {
		t.Fatalf("active row after the first was dispositioned: %v", err)
	}
	// The same loan in another task is independent.
	task2, req2 := fixture(t, ctx, d, db, "suite-active-2")
	if err := assign(task2, req2, "alice"); err != nil { // req2 is alice's: a work row serves its user's request
		t.Fatalf("same loan in another task: %v", err)
	}
}

// workInsertMany: a round's loans, several requests', in one statement: the
// rows' ids follow the list's order (a request's loans are read back in id
// order), user names round-trip whatever their characters.
func workInsertMany(t *testing.T, ctx context.Context, d drivers.Driver, db *sql.DB) {
	st := d.Statements()
	taskID, aliceReq := fixture(t, ctx, d, db, "suite-many")
	bob := `Bob "the <builder>" Ünal`
	bobReq, err := st.RequestInsert.InsertID(ctx, db, engineio.RequestInsertParams{TaskID: taskID, User: bob, Requested: 2})
	if err != nil {
		t.Fatalf("RequestInsert: %v", err)
	}
	type row struct {
		Loan, Req int64
		User      string
	}
	want := []row{{907, aliceReq, "alice"}, {3, aliceReq, "alice"}, {512, bobReq, bob}, {44, bobReq, bob}}
	var list []string
	for _, w := range want {
		user, _ := json.Marshal(w.User)
		list = append(list, fmt.Sprintf("[%d,%d,%s]", w.Loan, w.Req, user))
	}
	res, err := st.WorkInsertMany.Exec(ctx, db, engineio.WorkInsertManyParams{TaskID: taskID, Assignments: "[" + strings.Join(list, ",") + "]"})
	if err != nil {
		t.Fatalf("WorkInsertMany: %v", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 4 {
		t.Fatalf("WorkInsertMany: %d rows (%v), want 4", n, err)
	}
	rows, err := db.QueryContext(ctx, drivers.Rebind(d.Dialect(), `SELECT loan_id, request_id, user_name FROM loanq_work WHERE task_id = ? ORDER BY id`), taskID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.Loan, &r.Req, &r.User); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("work rows in id order: %v, want %v", got, want)
	}
}

func clock(t *testing.T, ctx context.Context, d drivers.Driver, db *sql.DB) {
	st := d.Statements()
	before, err := st.Now.One(ctx, db, engineio.NoParams{})
	if err != nil {
		t.Fatalf("Now: %v", err)
	}
	_, reqID := fixture(t, ctx, d, db, "suite-clock")
	after, err := st.Now.One(ctx, db, engineio.NoParams{})
	if err != nil {
		t.Fatalf("Now: %v", err)
	}
	r, err := st.RequestByID.One(ctx, db, engineio.IDParams{ID: reqID})
	if err != nil {
		t.Fatalf("RequestByID: %v", err)
	}
	status, requested, assigned, user := r.Status, r.Requested, r.Assigned, r.User
	b, c, a := before.Now.T, r.CreatedAt.T, after.Now.T
	// created_at is written by the database's clock between the two reads of
	// it (1 ms of slack for SQLite's millisecond text).
	if c.Before(b.Add(-time.Millisecond)) || c.After(a.Add(time.Millisecond)) {
		t.Fatalf("created_at %s is not between the database clock reads %s and %s", c, b, a)
	}
	if status != "pending" || requested != 2 || assigned != 0 || user != "alice" {
		t.Fatalf("request read back as %s/%d/%d/%s", status, requested, assigned, user)
	}
}

func rowLock(t *testing.T, ctx context.Context, d drivers.Driver, db *sql.DB, s drivers.Strategy) {
	st := d.Statements()
	taskID, _ := fixture(t, ctx, d, db, "suite-lock-"+string(s))
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if got, err := st.Lock(s).One(ctx, holder, engineio.TaskParams{TaskID: taskID}); err != nil || got.ID != taskID {
		t.Fatalf("holder could not take a free lock: %v", err)
	}
	requestWhileLocked(t, ctx, d, db, taskID)
	// skip and nowait must answer at once: a statement that queues behind
	// the holder instead (SKIP LOCKED or NOWAIT missing) fails the check
	// after this deadline, not after the test binary's timeout.
	answerCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	other, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	switch s {
	case drivers.Skip:
		_, err := st.LockSkip.One(answerCtx, other, engineio.TaskParams{TaskID: taskID})
		if !errors.Is(err, sql.ErrNoRows) {
			t.Fatalf("SKIP LOCKED on a held lock: %v, want no row at once", err)
		}
	case drivers.NoWait:
		_, err := st.LockNoWait.One(answerCtx, other, engineio.TaskParams{TaskID: taskID})
		if err == nil || !d.IsLockBusy(err) {
			t.Fatalf("NOWAIT on a held lock: %v, want the driver's lock-busy error", err)
		}
	case drivers.Wait:
		done := make(chan error, 1)
		var got engineio.IDRow
		go func() {
			var err error
			got, err = st.LockWait.One(ctx, other, engineio.TaskParams{TaskID: taskID})
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("plain FOR UPDATE returned (%v) while the lock was held", err)
		case <-time.After(500 * time.Millisecond):
		}
		if err := holder.Commit(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil || got.ID != taskID {
				t.Fatalf("waiter after release: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("waiter did not get the lock within 30 s of its release")
		}
	}
}

func lease(t *testing.T, ctx context.Context, d drivers.Driver, db *sql.DB) {
	st := d.Statements()
	taskID, _ := fixture(t, ctx, d, db, "suite-lease")
	acquire := func(owner string, ttlMS int64) (int64, bool) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		res, err := st.LeaseAcquire.Exec(ctx, tx, engineio.LeaseTakeParams{Owner: owner, TTLMS: ttlMS, TaskID: taskID})
		if err != nil {
			t.Fatalf("LeaseAcquire: %v", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return 0, false
		}
		token, err := st.LeaseToken.One(ctx, tx, engineio.LeaseOwnerParams{TaskID: taskID, Owner: owner})
		if err != nil {
			t.Fatalf("LeaseToken: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		return token.Token, true
	}
	fence := func(owner string, token int64) bool {
		res, err := st.LeaseFenceRelease.Exec(ctx, db, engineio.LeaseFenceParams{TaskID: taskID, Owner: owner, Token: token})
		if err != nil {
			t.Fatalf("LeaseFenceRelease: %v", err)
		}
		n, _ := res.RowsAffected()
		return n == 1
	}
	tokA, ok := acquire("A", 60000)
	if !ok {
		t.Fatal("A could not take a free lease")
	}
	requestWhileLocked(t, ctx, d, db, taskID)
	if _, ok := acquire("B", 60000); ok {
		t.Fatal("B took a lease that A holds")
	}
	if fence("A", tokA+1) || fence("B", tokA) {
		t.Fatal("the fence passed with a wrong token or owner")
	}
	if !fence("A", tokA) {
		t.Fatal("the fence failed for the lease's holder")
	}
	tokB, ok := acquire("B", 60000)
	if !ok || tokB <= tokA {
		t.Fatalf("B after A released: ok=%v token %d (A had %d)", ok, tokB, tokA)
	}
	if !fence("B", tokB) {
		t.Fatal("B's fence failed")
	}
	// Expiry: a lease of 1 ms is taken over, and its old holder is fenced off.
	tokC, ok := acquire("C", 1)
	if !ok {
		t.Fatal("C could not take a free lease")
	}
	time.Sleep(50 * time.Millisecond)
	tokD, ok := acquire("D", 60000)
	if !ok {
		t.Fatal("D could not take over an expired lease")
	}
	if fence("C", tokC) {
		t.Fatal("the holder of an expired, taken-over lease passed the fence")
	}
	if !fence("D", tokD) {
		t.Fatal("D's fence failed")
	}
	// Expiry alone fences: a holder whose lease ran out fails the fence
	// with its own owner and token even when nobody has taken the lease
	// over (the fence's lease_expires_at check, not the token, refuses it).
	tokE, ok := acquire("E", 1)
	if !ok {
		t.Fatal("E could not take a free lease")
	}
	time.Sleep(50 * time.Millisecond)
	if fence("E", tokE) {
		t.Fatal("the holder of an expired lease passed the fence before any take-over")
	}
	// The token must match exactly: F re-takes its own expired lease (a new
	// token), and its old round, fenced with the old token, is refused.
	tokF1, ok := acquire("F", 1)
	if !ok {
		t.Fatal("F could not take over an expired lease")
	}
	time.Sleep(50 * time.Millisecond)
	tokF2, ok := acquire("F", 60000)
	if !ok || tokF2 <= tokF1 {
		t.Fatalf("F re-taking its expired lease: ok=%v token %d (old %d)", ok, tokF2, tokF1)
	}
	if fence("F", tokF1) {
		t.Fatal("the fence passed with an older token of the same holder")
	}
	if !fence("F", tokF2) {
		t.Fatal("F's fence failed with its current token")
	}
}

// requestWhileLocked checks that a work request can be logged and committed
// while another transaction holds the task's lock: step 1 of docs/algorithm.md must never
// wait for the criteria query (a foreign-key check on the locked task row is
// the classic way to break this).
func requestWhileLocked(t *testing.T, ctx context.Context, d drivers.Driver, db *sql.DB, taskID int64) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := d.Statements().RequestInsert.InsertID(cctx, db, engineio.RequestInsertParams{TaskID: taskID, User: "while-locked", Requested: 1}); err != nil {
		t.Fatalf("a request could not be logged while the task lock was held: %v", err)
	}
}

// rows: two transactions claiming with the rows strategy lock disjoint rows,
// each the first ones in order that the other does not hold, and a claim of 0
// rows locks nothing.
func rows(t *testing.T, ctx context.Context, d drivers.Driver, db *sql.DB) {
	rl := d.(drivers.RowLocker)
	for _, q := range []string{"CREATE TABLE suite_rows (id INTEGER NOT NULL PRIMARY KEY, prio INTEGER NOT NULL)",
		"CREATE INDEX suite_rows_ix ON suite_rows (prio, id)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE suite_rows") })
	for i := 1; i <= 6; i++ {
		if _, err := db.ExecContext(ctx, "INSERT INTO suite_rows (id, prio) VALUES ("+d.Dialect().Placeholder(1)+", "+d.Dialect().Placeholder(2)+")", i, 10-i); err != nil {
			t.Fatal(err)
		}
	}
	src := drivers.CriteriaSource{Source: "suite_rows", Key: "id", Where: "prio > 0", Order: "prio", Kind: loankey.Integer}
	taskID, _ := fixture(t, ctx, d, db, "suite-rows")
	claim := func(n int) (*sql.Tx, []string) {
		tx, err := db.BeginTx(ctx, rl.RowsTxOptions())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback() })
		ids, err := rl.LockRows(ctx, tx, src, taskID, n)
		if err != nil {
			t.Fatalf("LockRows: %v\n%s", err, rl.RowsClaimSQL(src))
		}
		return tx, ids
	}
	_, none := claim(0)
	_, first := claim(2)
	_, second := claim(3)
	if len(none) != 0 {
		t.Errorf("a claim of 0 rows returned %v", none)
	}
	// prio = 10 - id: ascending prio is descending id.
	if fmt.Sprint(first) != "[6 5]" || fmt.Sprint(second) != "[4 3 2]" {
		t.Fatalf("claims locked %v and %v, want [6 5] and [4 3 2] (skip the other's rows, in order)", first, second)
	}
}

// Capabilities checks, with no database, that d's capabilities are want and
// that of the statements a capability governs (drivers.Capabilities
// CapabilityStatements) d sends exactly those named in sent: a driver's
// unit test pins its capabilities and their statements in one table.
func Capabilities(t *testing.T, d drivers.Driver, want drivers.Capabilities, sent ...string) {
	t.Helper()
	got := d.Capabilities()
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Errorf("capabilities\n got %+v\nwant %+v", got, want)
	}
	if err := drivers.CheckDriver(d); err != nil {
		t.Error(err)
	}
	texts := map[string]string{}
	for _, n := range d.Statements().List() {
		texts[n.Field] = n.SQL
	}
	listed := map[string]bool{}
	for _, f := range sent {
		listed[f] = true
	}
	for _, u := range got.CapabilityStatements() {
		if u.Sent != listed[u.Field] {
			t.Errorf("%s: %s says sent=%v, the test's table %v", u.Field, u.Because, u.Sent, listed[u.Field])
		}
		if (texts[u.Field] != "") != listed[u.Field] {
			t.Errorf("%s: text %q, the test's table says sent=%v", u.Field, texts[u.Field], listed[u.Field])
		}
		delete(listed, u.Field)
	}
	for f := range listed {
		t.Errorf("%s is in the test's table but no capability governs it", f)
	}
}
