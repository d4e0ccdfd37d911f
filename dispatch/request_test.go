package dispatch_test

import (
	"context"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

func TestGetServesHighestPriorityFIFO(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 10)
		ctx := context.Background()
		f.task(t, dispatch.TaskSpec{Name: "verify", Order: "priority DESC"})
		r1, err := f.e.Get(ctx, "verify", "oliver", 3, fast)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(r1.Loans) != "[10 9 8]" || r1.Status != "assigned" || r1.Assigned != 3 {
			t.Fatalf("first request got %+v, want loans 10 9 8 assigned", r1)
		}
		r2, err := f.e.Get(ctx, "verify", "tracy", 5, fast)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(r2.Loans) != "[7 6 5 4 3]" {
			t.Fatalf("second request got %v", r2.Loans)
		}
		r3, err := f.e.Get(ctx, "verify", "ann", 5, fast)
		if err != nil {
			t.Fatal(err)
		}
		if r3.Status != "partial" || fmt.Sprint(r3.Loans) != "[2 1]" || r3.Assigned != 2 || r3.Requested != 5 {
			t.Fatalf("third request got %+v, want partial 2 1", r3)
		}
		r4, err := f.e.Get(ctx, "verify", "bob", 1, fast)
		if err != nil {
			t.Fatal(err)
		}
		if r4.Status != "empty" || len(r4.Loans) != 0 {
			t.Fatalf("fourth request got %+v, want empty", r4)
		}
		f.audit(t)
	})
}

// Pending requests are served oldest first from one criteria query; with too
// few loans the earliest get theirs in full.
func TestPendingServedInArrivalOrder(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 5)
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "fifo"})
		// Three requests logged while nobody serves (as callers that got busy).
		st := f.d.Statements()
		var ids []int64
		for i, want := range []int{2, 2, 2} {
			id, err := st.RequestInsert.InsertID(ctx, f.db, engineio.RequestInsertParams{TaskID: task.ID, User: fmt.Sprintf("u%d", i), Requested: want})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		// A fourth caller takes the lock and serves everybody, itself last.
		r4, err := f.e.Get(ctx, "fifo", "u3", 2, fast)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"assigned [1 2]", "assigned [3 4]", "partial [5]"}
		for i, id := range ids {
			r, err := f.e.Request(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%s %v", r.Status, r.Loans); got != want[i] {
				t.Errorf("request %d (arrived #%d): %s, want %s", id, i+1, got, want[i])
			}
		}
		if r4.Status != "empty" {
			t.Errorf("latest request: %s %v, want empty", r4.Status, r4.Loans)
		}
		if runs := f.count(t, "SELECT COUNT(*) FROM loanq_query_run"); runs != 1 {
			t.Errorf("criteria query ran %d times, want once for all four requests", runs)
		}
		f.audit(t)
	})
}

// Many goroutines, each with its own connection pool (as separate nodes),
// ask for work at once, for every lock strategy of the dialect.
func TestConcurrentGetsNeverShareALoan(t *testing.T) {
	testdb.EachPooled(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 150)
		ctx := context.Background()
		for _, s := range f.d.Capabilities().Strategies {
			t.Run(string(s), func(t *testing.T) {
				name := "conc-" + string(s)
				task := f.task(t, dispatch.TaskSpec{Name: name, Lock: s, QueryDelay: 20 * time.Millisecond})
				const workers, perWorker, count = 12, 4, 3 // asks for 144 of 150 loans
				engines := make([]*dispatch.Engine, workers)
				for i := range engines {
					engines[i] = f.engine(t)
				}
				var mu sync.Mutex
				var got []int64
				var wg sync.WaitGroup
				errs := make(chan error, workers*perWorker)
				for i := 0; i < workers; i++ {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						for k := 0; k < perWorker; k++ {
							r, err := engines[i].Get(ctx, name, fmt.Sprintf("w%d", i), count, fast)
							if err != nil {
								errs <- err
								return
							}
							mu.Lock()
							got = append(got, loankey.Int64s(r.Loans)...)
							mu.Unlock()
						}
					}(i)
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatalf("get: %v", err)
				}
				// Exactly the 144 highest-priority loans, each once.
				sort.Slice(got, func(a, b int) bool { return got[a] < got[b] })
				if len(got) != workers*perWorker*count {
					t.Fatalf("handed out %d loans, want %d", len(got), workers*perWorker*count)
				}
				for i, id := range got {
					if id != int64(i+1) {
						t.Fatalf("loans handed out are not exactly 1..%d: position %d holds %d", len(got), i, id)
					}
				}
				if s != drivers.Rows {
					inAssignmentOrder(t, f, task.ID)
				}
				f.audit(t)
				requests := f.count(t, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ?", task.ID)
				runs := f.count(t, "SELECT COUNT(*) FROM loanq_query_run WHERE task_id = ?", task.ID)
				served := f.count(t, "SELECT COALESCE(SUM(requests_served), 0) FROM loanq_query_run WHERE task_id = ?", task.ID)
				if served != requests {
					t.Errorf("query-run log says %d requests served, %d were made", served, requests)
				}
				t.Logf("%s: %d requests served by %d criteria-query runs", s, requests, runs)
				if runs >= requests && s != drivers.Rows { // rows: each caller claims for itself
					// Coalescing: callers that found the lock held were served
					// by the holder's next round, many per query.
					t.Errorf("criteria query ran %d times for %d requests: no coalescing", runs, requests)
				}
				// Return the loans so the next strategy starts from a full queue.
				testdb.Exec(t, f.d, f.db, "UPDATE loanq_work SET disposition = 'complete', disposed_at = assigned_at WHERE task_id = ?", task.ID)
			})
		}
	})
}

// inAssignmentOrder fails the test unless the task's loans ascend in
// priority (here: id) in the order their work rows were inserted. Under a
// task lock the rounds run one after the other, each handing the top of what
// is left to its requests, oldest first, and inserting the work rows in that
// order: no round passes over a loan that a later round hands out
// (docs/scaling.md, "Priority skew"). The rows strategy claims side by side
// and is not held to it.
func inAssignmentOrder(t *testing.T, f *fixture, taskID int64) {
	t.Helper()
	rows, err := f.db.QueryContext(context.Background(), testdb.Rebind(f.d, "SELECT loan_id FROM loanq_work WHERE task_id = ? ORDER BY id"), taskID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var last int64
	for n := 1; rows.Next(); n++ {
		var loan int64
		if err := rows.Scan(&loan); err != nil {
			t.Fatal(err)
		}
		if loan < last {
			t.Fatalf("work row %d hands out loan %d after loan %d: a round passed over a higher-priority loan", n, loan, last)
		}
		last = loan
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// docs/algorithm.md, step 6: a request committed after the holder read the
// pending requests — here, inside the holder's transaction just before its
// commit — is still served, by the holder's look after its commit.
func TestRequestArrivingBeforeHolderCommitIsServed(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 10)
		ctx := context.Background()
		if f.d.Name() == "sqlite" {
			t.Skip("SQLite has one writer at a time: no request can commit while the holder's assignment transaction is open, so this window does not exist there")
		}
		for _, s := range f.d.Capabilities().Strategies {
			t.Run(string(s), func(t *testing.T) {
				if s == drivers.Rows {
					t.Skip("rows has no coalescing: every caller claims for its own request (TestRowsLateRequestServedByItsCaller)")
				}
				task := f.task(t, dispatch.TaskSpec{Name: "race-" + string(s), Lock: s})
				other := f.engine(t)
				var lateID int64
				f.e.SetBeforeCommit(func() {
					if lateID != 0 {
						return
					}
					// Another node logs its request (committed on its own
					// connection) while the holder's transaction is open.
					id, err := f.d.Statements().RequestInsert.InsertID(ctx, other.DB(), engineio.RequestInsertParams{TaskID: task.ID, User: "late", Requested: 1})
					if err != nil {
						t.Errorf("late request: %v", err)
					}
					lateID = id
				})
				defer f.e.SetBeforeCommit(nil)
				if _, err := f.e.Get(ctx, task.Name, "holder", 1, dispatch.GetOptions{NoWait: true}); err != nil {
					t.Fatal(err)
				}
				r, err := f.e.Request(ctx, lateID)
				if err != nil {
					t.Fatal(err)
				}
				if r.Status != "assigned" || len(r.Loans) != 1 {
					t.Fatalf("late request is %s %v after the holder returned; want assigned", r.Status, r.Loans)
				}
				f.audit(t)
			})
		}
	})
}

// docs/algorithm.md, step 5: a request logged while the criteria query runs is
// served from that same run, not by a second query.
func TestRequestArrivingDuringQueryIsServedByTheSameRun(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 10)
		ctx := context.Background()
		for _, s := range f.d.Capabilities().Strategies {
			t.Run(string(s), func(t *testing.T) {
				if s == drivers.Rows {
					t.Skip("rows has no coalescing: every caller claims for its own request (TestRowsLateRequestServedByItsCaller)")
				}
				task := f.task(t, dispatch.TaskSpec{Name: "late-" + string(s), Lock: s})
				other := f.engine(t)
				var lateID int64
				f.e.SetAfterQuery(func() {
					if lateID != 0 {
						return
					}
					id, err := f.d.Statements().RequestInsert.InsertID(ctx, other.DB(), engineio.RequestInsertParams{TaskID: task.ID, User: "late", Requested: 2})
					if err != nil {
						t.Errorf("late request: %v", err)
					}
					lateID = id
				})
				defer f.e.SetAfterQuery(nil)
				if _, err := f.e.Get(ctx, task.Name, "holder", 1, dispatch.GetOptions{NoWait: true}); err != nil {
					t.Fatal(err)
				}
				r, err := f.e.Request(ctx, lateID)
				if err != nil {
					t.Fatal(err)
				}
				if r.Status != "assigned" || len(r.Loans) != 2 {
					t.Fatalf("late request is %s %v after the holder returned; want assigned 2", r.Status, r.Loans)
				}
				runs := f.count(t, "SELECT COUNT(*) FROM loanq_query_run WHERE task_id = ?", task.ID)
				served := f.count(t, "SELECT COALESCE(MAX(requests_served), 0) FROM loanq_query_run WHERE task_id = ?", task.ID)
				if runs != 1 || served != 2 {
					t.Fatalf("%d criteria-query run(s), the largest serving %d request(s); want 1 run serving both", runs, served)
				}
				f.audit(t)
			})
		}
	})
}

// Names compare exactly on every database (MySQL's usual _ci collations
// would make "Ana" and "ana" one user): two users, two caps, two pipelines.
func TestUserNamesAreExact(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 10)
		ctx := context.Background()
		f.task(t, dispatch.TaskSpec{Name: "capped", MaxActive: 1})
		for _, user := range []string{"Ana", "ana", "ANA ✓"} {
			r, err := f.e.Get(ctx, "capped", user, 1, fast)
			if err != nil || r.Status != dispatch.StatusAssigned || r.User != user {
				t.Fatalf("%q: %+v, %v (another spelling's cap or pipeline counted against it?)", user, r, err)
			}
			p, err := f.e.Pipeline(ctx, user, "")
			if err != nil || len(p) != 1 {
				t.Fatalf("pipeline of %q: %d items, %v; want exactly its own 1", user, len(p), err)
			}
		}
		f.audit(t)
	})
}
