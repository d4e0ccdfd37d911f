package e2e

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// swapTimes exchanges a time column between two rows, so the row with the
// higher id has the older time: what Oracle RAC produces when two instances
// hand out identity values from their own cached ranges (NOORDER).
func swapTimes(t *testing.T, d drivers.Driver, db *sql.DB, table, column string, a, b int64) {
	t.Helper()
	read := func(id int64) any {
		var v any
		if err := db.QueryRow(testdb.Rebind(d, "SELECT "+column+" FROM "+table+" WHERE id = ?"), id).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	va, vb := read(a), read(b)
	testdb.Exec(t, d, db, "UPDATE "+table+" SET "+column+" = ? WHERE id = ?", vb, a)
	testdb.Exec(t, d, db, "UPDATE "+table+" SET "+column+" = ? WHERE id = ?", va, b)
}

func sameTime(t *testing.T, d drivers.Driver, db *sql.DB, table, column string, a, b int64) bool {
	t.Helper()
	var n int64
	q := "SELECT COUNT(*) FROM " + table + " x JOIN " + table + " y ON x." + column + " = y." + column + " WHERE x.id = ? AND y.id = ?"
	if err := db.QueryRow(testdb.Rebind(d, q), a, b).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func logRequest(t *testing.T, e *engine, taskID int64, user string) int64 {
	t.Helper()
	id, err := e.Driver.Statements().RequestInsert.InsertID(context.Background(), e.DB, engineio.RequestInsertParams{TaskID: taskID, User: user, Requested: 1})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// "Oldest first" is by time, then id, not by id alone: with the ids of two
// pending requests out of time order, the one logged earlier is served first;
// and a disposition of an inactive loan names the latest assignment by time.
func TestOldestFirstIsByTime(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 5)
		ctx := context.Background()
		mustOK(t, dsn, "admin", "task", "create", "one", "--where", "id = 3")
		task, err := e.Task(ctx, "one")
		if err != nil {
			t.Fatal(err)
		}
		late := logRequest(t, e, task.ID, "late")
		early := logRequest(t, e, task.ID, "early")
		// Two requests logged in the same clock tick (SQLite keeps
		// milliseconds) cannot be put out of order: log again until the
		// database clock has moved on.
		for sameTime(t, d, e.DB, "loanq_work_request", "created_at", late, early) {
			testdb.Exec(t, d, e.DB, "DELETE FROM loanq_work_request WHERE id = ?", early)
			early = logRequest(t, e, task.ID, "early")
		}
		swapTimes(t, d, e.DB, "loanq_work_request", "created_at", late, early)

		// One loan for two pending requests: serving them (here from a
		// recheck of the late one) gives it to the earlier request.
		got := decode(t, mustOK(t, dsn, "late", "--output", "json", "work", "status", strconv.FormatInt(late, 10), "--wait"))
		if got.Status != "empty" {
			t.Errorf("the later request (lower id) got %+v; the earlier one should have had the only loan", got)
		}
		got = decode(t, mustOK(t, dsn, "early", "--output", "json", "work", "status", strconv.FormatInt(early, 10)))
		if got.Status != "assigned" || len(got.Loans) != 1 || got.Loans[0] != 3 {
			t.Fatalf("the earlier request (higher id): %+v, want loan 3", got)
		}

		// Loan 3's history: early completes it, bob gets it again and says
		// never. Then the ids of the two assignments are put out of time order.
		mustOK(t, dsn, "early", "disposition", "one", "3", "complete")
		bob := decode(t, mustOK(t, dsn, "bob", "--output", "json", "work", "get", "one"))
		if len(bob.Loans) != 1 {
			t.Fatalf("bob: %+v", bob)
		}
		mustOK(t, dsn, "bob", "disposition", "one", "3", "never")
		var first, second int64
		rows, err := e.DB.Query(testdb.Rebind(d, "SELECT id FROM loanq_work WHERE task_id = ? AND loan_id = '3' ORDER BY id"), task.ID)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			first, second = second, first
			if err := rows.Scan(&second); err != nil {
				t.Fatal(err)
			}
		}
		rows.Close()
		if sameTime(t, d, e.DB, "loanq_work", "assigned_at", first, second) {
			t.Fatal("two assignments made by separate processes share a timestamp")
		}
		swapTimes(t, d, e.DB, "loanq_work", "assigned_at", first, second)
		// Now early's assignment (lower id) is the latest by time.
		r := loanq(t, dsn, "early", "disposition", "one", "3", "complete")
		if r.code != 2 || !strings.Contains(r.stderr, "(to early)") || !strings.Contains(r.stderr, "complete") {
			t.Errorf("disposition of an inactive loan: exit %d %s; want its latest assignment by time (to early, complete)", r.code, r.stderr)
		}
	})
}
