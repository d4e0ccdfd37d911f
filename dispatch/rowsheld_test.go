package dispatch_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"
)

// accLoans creates the wide-lock case's table (docs/mysql.md, "Reading `loanq explain`"): acc_loan with n rows, two in three of
// them OPEN, and the index (state, prio, id), which cannot serve the order
// "prio DESC, id": InnoDB sorts, and its SKIP LOCKED claim then locks every
// OPEN row it scanned, not only the five it returns.
func accLoans(t testing.TB, d drivers.Driver, db *sql.DB, n int, index string) {
	t.Helper()
	tables := d.Tables()
	testdb.Exec(t, d, db, fmt.Sprintf("CREATE TABLE acc_loan (id %s PRIMARY KEY, state VARCHAR(10) NOT NULL, prio INTEGER NOT NULL)", tables.BigInt))
	testdb.Exec(t, d, db, "CREATE INDEX acc_loan_ix ON acc_loan "+index)
	var rows []string
	for i := 1; i <= n; i++ {
		state := "OPEN"
		if i%3 == 0 {
			state = "CLOSED"
		}
		rows = append(rows, fmt.Sprintf("(%d, '%s', %d)", i, state, i%7))
		if len(rows) == 100 || i == n {
			testdb.Exec(t, d, db, "INSERT INTO acc_loan (id, state, prio) VALUES "+strings.Join(rows, ", "))
			rows = rows[:0]
		}
	}
}

// A rows caller is told `empty` (or `partial`) only when
// the criteria are exhausted. 24 callers, each on its own pool, ask for 5
// loans at once while claims lock far more rows than they return (MariaDB
// with an index that cannot serve the order): every one gets its 5. Then 12
// callers ask for 5 of the 23 loans left: together they get all 23, the
// callers that got fewer than asked were told `partial` or `empty` only
// once nothing was left.
func TestRowsNeverEmptyWhileLoansAreHeld(t *testing.T) {
	testdb.EachPooled(t, func(t *testing.T, dsn string) {
		d, db := testdb.Migrated(t, dsn)
		if !drivers.Supports(d, drivers.Rows) {
			t.Skipf("%s has no rows strategy", d.Name())
		}
		accLoans(t, d, db, 900, "(state, prio, id)")
		e := dispatch.New(db, d)
		ctx := context.Background()
		if _, _, err := e.Admin().CreateTask(ctx, dispatch.TaskSpec{Name: "acc", Source: "acc_loan", Key: "id",
			Where: "state = 'OPEN'", Order: "prio DESC, id", Lock: drivers.Rows, CreatedBy: "admin", AllowWideLocks: true}); err != nil {
			t.Fatal(err)
		}
		round := func(callers, count int) (got int, statuses map[string]int) {
			engines := make([]*dispatch.Engine, callers)
			for i := range engines {
				_, db := testdb.Open(t, dsn)
				engines[i] = dispatch.New(db, d)
			}
			var mu sync.Mutex
			statuses = map[string]int{}
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range engines {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					<-start
					r, err := engines[i].Get(ctx, "acc", fmt.Sprintf("p%d", i), count, fast)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						t.Errorf("caller %d: %v", i, err)
						return
					}
					statuses[r.Status]++
					got += len(r.Loans)
				}(i)
			}
			close(start)
			wg.Wait()
			return got, statuses
		}
		if got, st := round(24, 5); got != 120 || st[dispatch.StatusAssigned] != 24 {
			t.Fatalf("24 callers asking for 5 of 600 open loans got %d loans, statuses %v: want 120, all assigned", got, st)
		}
		// Leave 23 eligible loans: close all the others.
		free, err := drivers.ScanIDs(db.QueryContext(ctx, "SELECT id FROM acc_loan WHERE state = 'OPEN' AND "+d.Dialect().KeyAsText("id")+" NOT IN (SELECT loan_id FROM loanq_work) ORDER BY id"))
		if err != nil {
			t.Fatal(err)
		}
		var closing []string
		for _, id := range free[:len(free)-23] {
			closing = append(closing, fmt.Sprint(id))
		}
		testdb.Exec(t, d, db, "UPDATE acc_loan SET state = 'CLOSED' WHERE id IN ("+strings.Join(closing, ", ")+")")
		left := testdb.Int(t, d, db, "SELECT COUNT(*) FROM acc_loan WHERE state = 'OPEN' AND "+d.Dialect().KeyAsText("id")+" NOT IN (SELECT loan_id FROM loanq_work)")
		if left != 23 {
			t.Fatalf("setup: %d loans left, want 23", left)
		}
		got, st := round(12, 5)
		if got != 23 {
			t.Fatalf("12 callers asking for 5 of the 23 loans left got %d (statuses %v): some were told partial or empty while loans remained", got, st)
		}
		if st[dispatch.StatusAssigned] != 4 || st[dispatch.StatusPartial] != 1 || st[dispatch.StatusEmpty] != 7 {
			t.Errorf("statuses %v: want 4 assigned, 1 partial (3 loans), 7 empty", st)
		}
		if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work GROUP BY loan_id ORDER BY COUNT(*) DESC LIMIT 1"); n != 1 {
			t.Errorf("a loan was assigned %d times", n)
		}
	})
}

// `task create|update --lock rows` probe the claim. On
// MariaDB with the index (state, prio, id) a claim of 5 locks all 600 open
// rows: create and update are refused (exit 2, the index to create in the
// hint, nothing stored) unless AllowWideLocks, and the task keeps the
// verdict. On PostgreSQL the claim locks 5: accepted, verdict ok. A task
// moved to another strategy forgets it.
func TestRowsTaskProbedAtCreateAndUpdate(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, db := testdb.Migrated(t, dsn)
		if !drivers.Supports(d, drivers.Rows) {
			t.Skipf("%s has no rows strategy", d.Name())
		}
		accLoans(t, d, db, 900, "(state, prio, id)")
		e := dispatch.New(db, d)
		ctx := context.Background()
		spec := dispatch.TaskSpec{Name: "acc", Source: "acc_loan", Key: "id", Where: "state = 'OPEN'", Order: "prio DESC, id", Lock: drivers.Rows, CreatedBy: "admin"}
		wide := d.Name() == "mysql"
		_, _, err := e.Admin().CreateTask(ctx, spec)
		if wide {
			pe, _ := err.(*problem.Error)
			if problem.KindOf(err) != problem.Usage || pe == nil || !strings.Contains(pe.Hint, "CREATE INDEX acc_loan_acc_ix ON acc_loan (state, prio DESC, id)") {
				t.Fatalf("create of a wide rows task: %v, want a usage error naming the index", err)
			}
			if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_task"); n != 0 {
				t.Fatalf("a refused create stored %d tasks", n)
			}
			spec.AllowWideLocks = true
			_, _, err = e.Admin().CreateTask(ctx, spec)
		}
		if err != nil {
			t.Fatal(err)
		}
		task, err := e.Task(ctx, "acc")
		if err != nil {
			t.Fatal(err)
		}
		v, err := e.Admin().LockVerdict(ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		if wide && !strings.HasPrefix(v, "warning: a claim of 5 locks 600 rows (the order needs a sort)") ||
			!wide && v != "ok: a claim of 5 locks 5 rows" {
			t.Errorf("kept verdict %q", v)
		}
		if wide {
			// Changing the order to one the index serves is accepted and
			// the verdict follows; back to the wide order is refused.
			order := "prio, id"
			if _, err := e.Admin().UpdateTask(ctx, "acc", dispatch.TaskChange{Order: &order, UpdatedBy: "admin"}); err != nil {
				t.Fatal(err)
			}
			if v, _ := e.Admin().LockVerdict(ctx, task); v != "ok: a claim of 5 locks 5 rows" {
				t.Errorf("verdict after the order the index serves: %q", v)
			}
			order = "prio DESC, id"
			if _, err := e.Admin().UpdateTask(ctx, "acc", dispatch.TaskChange{Order: &order, UpdatedBy: "admin"}); problem.KindOf(err) != problem.Usage {
				t.Errorf("update back to the wide order: %v, want refused", err)
			}
		}
		skip := drivers.Skip
		if _, err := e.Admin().UpdateTask(ctx, "acc", dispatch.TaskChange{Lock: &skip, UpdatedBy: "admin"}); err != nil {
			t.Fatal(err)
		}
		if v, _ := e.Admin().LockVerdict(ctx, task); v != "" {
			t.Errorf("verdict kept after --lock skip: %q", v)
		}
	})
}
