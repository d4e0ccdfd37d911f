// Package drivertest is the conformance suite every loanq driver passes. It
// talks to a real server of the driver's kind: connection, migrations, the
// one-active-row constraint, the database clock, and the semantics of each
// lock statement the driver declares.
package drivertest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/schema"
)

// Exercise runs the whole suite against dsn, which must name an empty
// database (or schema) the suite may create and drop loanq tables in.
func Exercise(t *testing.T, d drivers.Driver, dsn string) {
	ctx := context.Background()
	parsed, err := drivers.ParseDSN(dsn)
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
	t.Run("database clock", func(t *testing.T) { clock(t, ctx, d, db) })
	for _, s := range d.Strategies() {
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

func statements(t *testing.T, d drivers.Driver) {
	st := d.Statements()
	for _, n := range st.List() {
		row := strings.HasPrefix(n.Field, "Lock")
		if n.SQL == "" && !row && n.Empty == "" {
			t.Errorf("statement %s is empty", n.Field)
		}
	}
	for _, s := range d.Strategies() {
		if s == drivers.Rows {
			if _, ok := d.(drivers.RowLocker); !ok {
				t.Errorf("strategy rows is declared but the driver is no drivers.RowLocker")
			}
			if st.UserLock == "" || st.UserLockEnsure == "" || st.WorkInsertRows == "" {
				t.Errorf("strategy rows is declared but UserLock, UserLockEnsure or WorkInsertRows is empty")
			}
			continue
		}
		if s != drivers.Lease && st.Lock(s) == "" {
			t.Errorf("strategy %s is declared but its lock statement is empty", s)
		}
		if s != drivers.Lease && st.BenchClaim(s) == "" {
			t.Errorf("strategy %s is declared but its bench claim statement is empty", s)
		}
	}
	if q := d.CriteriaQuery(drivers.CriteriaSource{Source: "loan", Key: "id", Where: "1 = 1"}); !strings.Contains(q, "loanq_work") {
		t.Errorf("criteria query does not exclude ineligible loans:\n%s", q)
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
	taskID, err = d.InsertReturningID(ctx, db, st.TaskInsert, name, "loan", "id", "1 = 1", "", nil, string(d.Strategies()[0]), 0, 60000, "suite", nil)
	if err != nil {
		t.Fatalf("TaskInsert: %v", err)
	}
	reqID, err = d.InsertReturningID(ctx, db, st.RequestInsert, taskID, "alice", 2)
	if err != nil {
		t.Fatalf("RequestInsert: %v", err)
	}
	return taskID, reqID
}

func oneActive(t *testing.T, ctx context.Context, d drivers.Driver, db *sql.DB) {
	st := d.Statements()
	taskID, reqID := fixture(t, ctx, d, db, "suite-active")
	if _, err := db.ExecContext(ctx, st.WorkInsert, taskID, int64(1)<<40, "alice", reqID); err != nil {
		t.Fatalf("first active row: %v", err)
	}
	_, err := db.ExecContext(ctx, st.WorkInsert, taskID, int64(1)<<40, "bob", reqID)
	if err == nil {
		t.Fatal("the schema accepted a second active row for the same task and loan")
	}
	if !d.IsUniqueViolation(err) {
		t.Fatalf("second active row failed with %v; want a unique violation", err)
	}
	// Once dispositioned, the row is history and no longer collides.
	var workID int64
	var who string
	if err := db.QueryRowContext(ctx, st.ActiveWork, taskID, int64(1)<<40).Scan(&workID, &who); err != nil {
		t.Fatalf("ActiveWork: %v", err)
	}
	if _, err := db.ExecContext(ctx, st.Dispose, "complete", nil, workID, "alice"); err != nil {
		t.Fatalf("Dispose: %v", err)
	}
	if _, err := db.ExecContext(ctx, st.WorkInsert, taskID, int64(1)<<40, "bob", reqID); err != nil {
		t.Fatalf("active row after the first was dispositioned: %v", err)
	}
	// The same loan in another task is independent.
	task2, req2 := fixture(t, ctx, d, db, "suite-active-2")
	if _, err := db.ExecContext(ctx, st.WorkInsert, task2, int64(1)<<40, "carol", req2); err != nil {
		t.Fatalf("same loan in another task: %v", err)
	}
}

func scanTime(t *testing.T, v any) time.Time {
	switch x := v.(type) {
	case time.Time:
		return x.UTC()
	case string:
		tt, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			t.Fatalf("time %q: %v", x, err)
		}
		return tt
	case []byte:
		return scanTime(t, string(x))
	}
	t.Fatalf("unexpected time type %T", v)
	return time.Time{}
}

func clock(t *testing.T, ctx context.Context, d drivers.Driver, db *sql.DB) {
	st := d.Statements()
	var before, after, created any
	if err := db.QueryRowContext(ctx, st.Now).Scan(&before); err != nil {
		t.Fatalf("Now: %v", err)
	}
	_, reqID := fixture(t, ctx, d, db, "suite-clock")
	if err := db.QueryRowContext(ctx, st.Now).Scan(&after); err != nil {
		t.Fatalf("Now: %v", err)
	}
	var id, taskID int64
	var task, user, status string
	var requested, assigned int
	var served any
	if err := db.QueryRowContext(ctx, st.RequestByID, reqID).Scan(&id, &taskID, &task, &user, &requested, &assigned, &status, &created, &served); err != nil {
		t.Fatalf("RequestByID: %v", err)
	}
	b, c, a := scanTime(t, before), scanTime(t, created), scanTime(t, after)
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
	var got int64
	if err := holder.QueryRowContext(ctx, st.Lock(s), taskID).Scan(&got); err != nil || got != taskID {
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
		err := other.QueryRowContext(answerCtx, st.LockSkip, taskID).Scan(&got)
		if !errors.Is(err, sql.ErrNoRows) {
			t.Fatalf("SKIP LOCKED on a held lock: %v, want no row at once", err)
		}
	case drivers.NoWait:
		err := other.QueryRowContext(answerCtx, st.LockNoWait, taskID).Scan(&got)
		if err == nil || !d.IsLockBusy(err) {
			t.Fatalf("NOWAIT on a held lock: %v, want the driver's lock-busy error", err)
		}
	case drivers.Wait:
		done := make(chan error, 1)
		go func() { done <- other.QueryRowContext(ctx, st.LockWait, taskID).Scan(&got) }()
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
			if err != nil || got != taskID {
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
		res, err := tx.ExecContext(ctx, st.LeaseAcquire, owner, ttlMS, taskID)
		if err != nil {
			t.Fatalf("LeaseAcquire: %v", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return 0, false
		}
		var token int64
		if err := tx.QueryRowContext(ctx, st.LeaseToken, taskID, owner).Scan(&token); err != nil {
			t.Fatalf("LeaseToken: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		return token, true
	}
	fence := func(owner string, token int64) bool {
		res, err := db.ExecContext(ctx, st.LeaseFenceRelease, taskID, owner, token)
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
// while another transaction holds the task's lock: SPEC §3 step 1 must never
// wait for the criteria query (a foreign-key check on the locked task row is
// the classic way to break this).
func requestWhileLocked(t *testing.T, ctx context.Context, d drivers.Driver, db *sql.DB, taskID int64) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := d.InsertReturningID(cctx, db, d.Statements().RequestInsert, taskID, "while-locked", 1); err != nil {
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
		if _, err := db.ExecContext(ctx, drivers.Rebind(d, "INSERT INTO suite_rows (id, prio) VALUES (?, ?)"), i, 10-i); err != nil {
			t.Fatal(err)
		}
	}
	src := drivers.CriteriaSource{Source: "suite_rows", Key: "id", Where: "prio > 0", Order: "prio"}
	taskID, _ := fixture(t, ctx, d, db, "suite-rows")
	claim := func(n int) (*sql.Tx, []int64) {
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
