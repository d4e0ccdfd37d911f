package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

type workListJSON struct {
	Work []struct {
		Task       string `json:"task"`
		LoanID     int64  `json:"loan_id"`
		User       string `json:"user"`
		AssignedAt string `json:"assigned_at"`
		AgeMS      int64  `json:"age_ms"`
	} `json:"work"`
}

type statsJSON struct {
	WindowMS int64 `json:"window_ms"`
	Tasks    []struct {
		Task            string `json:"task"`
		PendingRequests int64  `json:"pending_requests"`
		ActiveTotal     int64  `json:"active_total"`
		ActiveByUser    []struct {
			User  string `json:"user"`
			Count int64  `json:"count"`
		} `json:"active_by_user"`
		Dispositions map[string]int64 `json:"dispositions"`
		Runs         struct {
			Count          int     `json:"count"`
			P50MS          int64   `json:"p50_ms"`
			P95MS          int64   `json:"p95_ms"`
			RequestsPerRun float64 `json:"requests_per_run"`
		} `json:"runs"`
	} `json:"tasks"`
}

func jsonOf(t *testing.T, r result, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, r.stdout)
	}
}

// oldTime is a timestamp literal far in the past, in the form the dialect's
// column accepts (the test moves an assignment back in time with it).
var oldTime = map[string]string{"sqlite": "2000-01-01T00:00:00.000Z", "postgres": "2000-01-01 00:00:00+00", "mysql": "2000-01-01 00:00:00"}

// The supervisor view on every database: everyone's work, oldest first, with
// ages from the database clock and the filters; per-task stats that match
// the tables they are read from.
func TestSupervisorView(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 30)
		db := e.DB
		ctx := context.Background()
		mustOK(t, dsn, "admin", "task", "create", "t1", "--where", "eligible = 1", "--order", "priority")
		mustOK(t, dsn, "admin", "task", "create", "t2", "--where", "eligible = 1", "--order", "priority")
		ana := decode(t, mustOK(t, dsn, "ana", "--output", "json", "work", "get", "t1", "--count", "4"))
		ben := decode(t, mustOK(t, dsn, "ben", "--output", "json", "work", "get", "t2", "--count", "2"))
		mustOK(t, dsn, "ana", "disposition", "t1", strconv.FormatInt(ana.Loans[0], 10), "complete")
		mustOK(t, dsn, "ana", "disposition", "t1", strconv.FormatInt(ana.Loans[1], 10), "return", "--after", "1h")
		// ana's third loan was assigned long ago: it must come first and pass --older-than.
		testdb.Exec(t, d, db, "UPDATE loanq_work SET assigned_at = '"+oldTime[d.Name()]+"' WHERE loan_id = ? AND disposition IS NULL AND user_name = 'ana'", fmt.Sprint(ana.Loans[2]))
		// A pending request of carl (logged, never served).
		task1 := testdb.Int(t, d, db, "SELECT id FROM loanq_task WHERE name = 't1'")
		if _, err := d.Statements().RequestInsert.InsertID(ctx, db, engineio.RequestInsertParams{TaskID: task1, User: "carl", Requested: 2}); err != nil {
			t.Fatal(err)
		}

		var all workListJSON
		jsonOf(t, mustOK(t, dsn, "admin", "--output", "json", "work", "list"), &all)
		if len(all.Work) != 4 || all.Work[0].LoanID != ana.Loans[2] || all.Work[0].User != "ana" {
			t.Fatalf("work list: %+v (want 4 items, ana's old loan %d first)", all.Work, ana.Loans[2])
		}
		if age := time.Duration(all.Work[0].AgeMS) * time.Millisecond; age < 20*365*24*time.Hour {
			t.Fatalf("age of work assigned in 2000: %s", age)
		}
		for i, w := range all.Work {
			if _, err := time.Parse(time.RFC3339, w.AssignedAt); err != nil || w.AssignedAt[len(w.AssignedAt)-1] != 'Z' {
				t.Fatalf("assigned_at %q is not RFC 3339 UTC", w.AssignedAt)
			}
			if i > 0 && w.AssignedAt < all.Work[i-1].AssignedAt {
				t.Fatalf("work list is not oldest first: %+v", all.Work)
			}
		}
		var old workListJSON
		jsonOf(t, mustOK(t, dsn, "admin", "--output", "json", "work", "list", "--older-than", "24h"), &old)
		if len(old.Work) != 1 || old.Work[0].LoanID != ana.Loans[2] {
			t.Fatalf("work list --older-than 24h: %+v", old.Work)
		}
		var bens workListJSON
		jsonOf(t, mustOK(t, dsn, "admin", "--output", "json", "work", "list", "--user", "ben", "--task", "t2"), &bens)
		if len(bens.Work) != 2 || bens.Work[0].LoanID != ben.Loans[0] || bens.Work[1].LoanID != ben.Loans[1] {
			t.Fatalf("work list --user ben --task t2: %+v", bens.Work)
		}
		var none workListJSON
		jsonOf(t, mustOK(t, dsn, "admin", "--output", "json", "work", "list", "--user", "ben", "--task", "t1"), &none)
		if len(none.Work) != 0 {
			t.Fatalf("work list --user ben --task t1: %+v, want none", none.Work)
		}

		var st statsJSON
		jsonOf(t, mustOK(t, dsn, "admin", "--output", "json", "task", "stats"), &st)
		if st.WindowMS != 24*3600*1000 || len(st.Tasks) != 2 || st.Tasks[0].Task != "t1" || st.Tasks[1].Task != "t2" {
			t.Fatalf("task stats: %+v", st)
		}
		t1, t2 := st.Tasks[0], st.Tasks[1]
		if t1.PendingRequests != 1 || t1.ActiveTotal != 2 || len(t1.ActiveByUser) != 1 || t1.ActiveByUser[0].User != "ana" || t1.ActiveByUser[0].Count != 2 {
			t.Fatalf("t1 pending/active: %+v", t1)
		}
		if t1.Dispositions["complete"] != 1 || t1.Dispositions["return"] != 1 || t1.Dispositions["never"] != 0 {
			t.Fatalf("t1 dispositions: %v", t1.Dispositions)
		}
		if t2.PendingRequests != 0 || t2.ActiveTotal != 2 || t2.ActiveByUser[0].User != "ben" || t2.Dispositions["complete"] != 0 {
			t.Fatalf("t2: %+v", t2)
		}
		for _, s := range st.Tasks {
			runs := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_query_run r JOIN loanq_task t ON t.id = r.task_id WHERE t.name = ?", s.Task)
			served := testdb.Int(t, d, db, "SELECT SUM(requests_served) FROM loanq_query_run r JOIN loanq_task t ON t.id = r.task_id WHERE t.name = ?", s.Task)
			maxMS := testdb.Int(t, d, db, "SELECT MAX(duration_ms) FROM loanq_query_run r JOIN loanq_task t ON t.id = r.task_id WHERE t.name = ?", s.Task)
			if int64(s.Runs.Count) != runs || runs == 0 || s.Runs.RequestsPerRun != float64(served)/float64(runs) ||
				s.Runs.P50MS > s.Runs.P95MS || s.Runs.P95MS > maxMS {
				t.Fatalf("%s runs %+v; the table has %d runs serving %d requests, longest %dms", s.Task, s.Runs, runs, served, maxMS)
			}
		}
		var one statsJSON
		jsonOf(t, mustOK(t, dsn, "admin", "--output", "json", "task", "stats", "t2"), &one)
		if len(one.Tasks) != 1 || one.Tasks[0].Task != "t2" {
			t.Fatalf("task stats t2: %+v", one)
		}

		before := snapshot(t, db)
		for _, c := range []badInput{
			{"work list older-than negative", "a", []string{"work", "list", "--older-than", "-1h"}, 2, "--older-than"},
			{"work list older-than malformed", "a", []string{"work", "list", "--older-than", "old"}, 2, "--older-than"},
			{"work list bad task name", "a", []string{"work", "list", "--task", "t1; DROP TABLE loan"}, 2, "task"},
			{"work list unknown task", "a", []string{"work", "list", "--task", "nosuch"}, 2, "unknown task"},
			{"work list empty user", "a", []string{"work", "list", "--user", ""}, 2, "--user"},
			{"work list argument", "a", []string{"work", "list", "t1"}, 2, "argument"},
			{"task stats unknown task", "a", []string{"task", "stats", "nosuch"}, 2, "unknown task"},
			{"task stats two tasks", "a", []string{"task", "stats", "t1", "t2"}, 2, "argument"},
		} {
			check(t, c, loanq(t, dsn, c.user, c.args...))
		}
		if after := snapshot(t, db); after != before {
			t.Fatal("bad input to the supervisor view changed the database")
		}
	})
}
