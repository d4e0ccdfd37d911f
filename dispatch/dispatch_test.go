package dispatch_test

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"
)

// fast rechecks keep the tests quick; production defaults are 5 s, 10 s, 20 s.
var fast = dispatch.GetOptions{Backoff: []time.Duration{20 * time.Millisecond, 50 * time.Millisecond}, Timeout: 2 * time.Minute}

type fixture struct {
	d   drivers.Driver
	db  *sql.DB
	dsn string
	e   *dispatch.Engine
}

func setup(t *testing.T, dsn string, loans int) *fixture {
	t.Helper()
	d, db := testdb.Migrated(t, dsn)
	testdb.CreateLoans(t, d, db, loans)
	return &fixture{d: d, db: db, dsn: dsn, e: dispatch.New(db, d)}
}

func (f *fixture) task(t *testing.T, spec dispatch.TaskSpec) *dispatch.Task {
	t.Helper()
	if spec.Where == "" {
		spec.Where = "eligible = 1"
	}
	if spec.Order == "" {
		spec.Order = "priority"
	}
	spec.CreatedBy = "admin"
	task, created, err := f.e.CreateTask(context.Background(), spec)
	if err != nil || !created {
		t.Fatalf("CreateTask %s: created=%v err=%v", spec.Name, created, err)
	}
	return task
}

// engine returns a new engine on its own pool, as another node would have.
func (f *fixture) engine(t *testing.T) *dispatch.Engine {
	_, db := testdb.Open(t, f.dsn)
	return dispatch.New(db, f.d)
}

// audit fails the test on any invariant violation in the final state.
func (f *fixture) audit(t *testing.T) {
	t.Helper()
	findings, err := f.e.Audit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range findings {
		if x.Count != 0 {
			t.Errorf("audit %s: %d (%s)", x.Check, x.Count, x.Purpose)
		}
	}
}

func (f *fixture) count(t *testing.T, q string, args ...any) int64 {
	t.Helper()
	return testdb.Int(t, f.d, f.db, q, args...)
}

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
			id, err := st.RequestInsert.InsertID(ctx, f.db, drivers.RequestInsertParams{TaskID: task.ID, User: fmt.Sprintf("u%d", i), Requested: want})
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
							got = append(got, drivers.Int64s(r.Loans)...)
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
					id, err := f.d.Statements().RequestInsert.InsertID(ctx, other.DB, drivers.RequestInsertParams{TaskID: task.ID, User: "late", Requested: 1})
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
					id, err := f.d.Statements().RequestInsert.InsertID(ctx, other.DB, drivers.RequestInsertParams{TaskID: task.ID, User: "late", Requested: 2})
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

// The per-task cap holds when one user asks from many connections at once.
func TestMaxActiveUnderConcurrency(t *testing.T) {
	testdb.EachPooled(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 100)
		ctx := context.Background()
		for _, s := range f.d.Capabilities().Strategies {
			t.Run(string(s), func(t *testing.T) {
				task := f.task(t, dispatch.TaskSpec{Name: "cap-" + string(s), Lock: s, MaxActive: 5})
				var wg sync.WaitGroup
				for i := 0; i < 8; i++ {
					e := f.engine(t)
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, err := e.Get(ctx, task.Name, "oliver", 2, fast); err != nil {
							t.Errorf("get: %v", err)
						}
					}()
				}
				wg.Wait()
				active := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND user_name = 'oliver' AND disposition IS NULL", task.ID)
				if active > 5 {
					t.Fatalf("oliver holds %d active loans in a task capped at 5", active)
				}
				// Concurrent calls of one user may attach to one pending
				// request (docs/algorithm.md, "Cancelling and attaching"), so
				// they may have asked for fewer than 5 in all: asking again
				// one by one tops up to the cap and never past it.
				for range 3 {
					if _, err := f.e.Get(ctx, task.Name, "oliver", 2, fast); err != nil {
						t.Fatalf("get: %v", err)
					}
				}
				active = f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND user_name = 'oliver' AND disposition IS NULL", task.ID)
				if active != 5 {
					t.Fatalf("oliver holds %d active loans in a task capped at 5", active)
				}
				f.audit(t)
			})
		}
	})
}

func TestDispositions(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 4)
		ctx := context.Background()
		f.task(t, dispatch.TaskSpec{Name: "disp"})
		r, err := f.e.Get(ctx, "disp", "oliver", 4, fast)
		if err != nil || fmt.Sprint(r.Loans) != "[1 2 3 4]" {
			t.Fatalf("get: %v %v", r, err)
		}
		must := func(loan any, action string, after time.Duration, given bool) {
			t.Helper()
			if _, err := f.e.Dispose(ctx, "disp", fmt.Sprint(loan), "oliver", action, after, given); err != nil {
				t.Fatalf("dispose %d %s: %v", loan, action, err)
			}
		}
		must(1, "complete", 0, false)                                          // still matches: back at once
		must(2, "return", 0, true)                                             // return after 0s: back at once
		must(3, "return", 2*time.Hour, true)                                   // not before 2 h
		must(4, "never", 0, false)                                             // never again
		testdb.Exec(t, f.d, f.db, "UPDATE loan SET eligible = 0 WHERE id = 1") // 1 no longer matches

		r, err = f.e.Get(ctx, "disp", "tracy", 4, fast)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(r.Loans) != "[2]" || r.Status != "partial" {
			t.Fatalf("after dispositions got %s %v, want partial [2]", r.Status, r.Loans)
		}
		// 1 comes back once it matches again.
		testdb.Exec(t, f.d, f.db, "UPDATE loan SET eligible = 1 WHERE id = 1")
		if r, _ = f.e.Get(ctx, "disp", "tracy", 4, fast); fmt.Sprint(r.Loans) != "[1]" {
			t.Fatalf("completed loan that matches again: got %v, want [1]", r.Loans)
		}
		// 3's return time lies 2 h ahead on the database clock; move it 2 h
		// back (as if the time had passed) and it is eligible again.
		ret := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE loan_id = '3' AND disposition = 'return' AND return_at > assigned_at")
		if ret != 1 {
			t.Fatalf("loan 3's return_at is not after its assignment")
		}
		testdb.Exec(t, f.d, f.db, "UPDATE loanq_work SET return_at = assigned_at WHERE loan_id = '3'")
		if r, _ = f.e.Get(ctx, "disp", "tracy", 4, fast); fmt.Sprint(r.Loans) != "[3]" {
			t.Fatalf("returned loan past its time: got %v, want [3]", r.Loans)
		}
		if r, _ = f.e.Get(ctx, "disp", "tracy", 4, fast); r.Status != "empty" {
			t.Fatalf("never-dispositioned loan came back: %v", r.Loans)
		}
		// History is kept: loan 2 has two rows, the first still says return.
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE loan_id = '2'"); n != 2 {
			t.Fatalf("loan 2 has %d history rows, want 2", n)
		}
		f.audit(t)
	})
}

func TestReturnTimeComesFromDatabaseClock(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 1)
		ctx := context.Background()
		f.task(t, dispatch.TaskSpec{Name: "clock"})
		if _, err := f.e.Get(ctx, "clock", "oliver", 1, fast); err != nil {
			t.Fatal(err)
		}
		if _, err := f.e.Dispose(ctx, "clock", "1", "oliver", "return", 2*time.Hour, true); err != nil {
			t.Fatal(err)
		}
		// return_at - disposed_at is exactly 2 h: both written by the database.
		n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE disposition = 'return' AND return_at > disposed_at")
		if n != 1 {
			t.Fatal("return_at is not after disposed_at")
		}
		items, err := f.e.Pipeline(ctx, "oliver", "")
		if err != nil || len(items) != 0 {
			t.Fatalf("pipeline after disposition: %v %v", items, err)
		}
	})
}

func TestBadInputChangesNothing(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 3)
		ctx := context.Background()
		f.task(t, dispatch.TaskSpec{Name: "bad"})
		if _, err := f.e.Get(ctx, "bad", "oliver", 1, fast); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, f)
		cases := map[string]error{}
		_, err := f.e.Get(ctx, "nope", "oliver", 1, fast)
		cases["unknown task"] = err
		_, err = f.e.Get(ctx, "bad", "oliver", 0, fast)
		cases["count 0"] = err
		_, err = f.e.Get(ctx, "bad", "oliver", dispatch.MaxCount+1, fast)
		cases["count too big"] = err
		_, err = f.e.Get(ctx, "bad'; DROP TABLE loanq_work--", "oliver", 1, fast)
		cases["task name with SQL"] = err
		_, err = f.e.Status(ctx, 999999, false, fast)
		cases["unknown request"] = err
		_, err = f.e.Dispose(ctx, "bad", "1", "tracy", "complete", 0, false)
		cases["not the assignee"] = err
		_, err = f.e.Dispose(ctx, "bad", "2", "oliver", "complete", 0, false)
		cases["never assigned"] = err
		_, err = f.e.Dispose(ctx, "bad", "1", "oliver", "return", 73*time.Hour, true)
		cases["after 73h"] = err
		_, err = f.e.Dispose(ctx, "bad", "1", "oliver", "return", -time.Hour, true)
		cases["after -1h"] = err
		_, err = f.e.Dispose(ctx, "bad", "1", "oliver", "complete", time.Hour, true)
		cases["after with complete"] = err
		_, err = f.e.Dispose(ctx, "bad", "1", "oliver", "later", 0, false)
		cases["unknown action"] = err
		_, _, err = f.e.CreateTask(ctx, dispatch.TaskSpec{Name: "bad", Where: "eligible = 1", CreatedBy: "a"})
		cases["task exists"] = err
		_, _, err = f.e.CreateTask(ctx, dispatch.TaskSpec{Name: "t2", Where: "no_such_column = 1", CreatedBy: "a"})
		cases["criteria bad column"] = err
		_, _, err = f.e.CreateTask(ctx, dispatch.TaskSpec{Name: "t3", Where: "eligible = = 1", CreatedBy: "a"})
		cases["criteria syntax"] = err
		_, _, err = f.e.CreateTask(ctx, dispatch.TaskSpec{Name: "t4", Where: "1=1; DROP TABLE loan", CreatedBy: "a"})
		cases["criteria with ;"] = err
		_, _, err = f.e.CreateTask(ctx, dispatch.TaskSpec{Name: "t5", Source: "loan; DROP TABLE loan", Where: "1=1", CreatedBy: "a"})
		cases["source with SQL"] = err
		_, _, err = f.e.CreateTask(ctx, dispatch.TaskSpec{Name: "t6", Where: "1=1", Lock: "bogus", CreatedBy: "a"})
		cases["unknown lock"] = err
		_, err = f.e.Pipeline(ctx, "oliver", "nope")
		cases["pipeline unknown task"] = err
		for name, err := range cases {
			if err == nil {
				t.Errorf("%s: no error", name)
				continue
			}
			if problem.ExitCode(err) != problem.ExitUsage {
				t.Errorf("%s: exit code %d (%v), want 2", name, problem.ExitCode(err), err)
			}
		}
		if after := snapshot(t, f); after != before {
			t.Errorf("bad input changed the database:\nbefore %s\nafter  %s", before, after)
		}
	})
}

// snapshot summarises the loanq tables (row counts and key sums).
func snapshot(t *testing.T, f *fixture) string {
	return fmt.Sprintf("tasks=%d requests=%d/%d work=%d/%d runs=%d loans=%d",
		f.count(t, "SELECT COUNT(*) FROM loanq_task"),
		f.count(t, "SELECT COUNT(*) FROM loanq_work_request"),
		f.count(t, "SELECT COALESCE(SUM(assigned), 0) FROM loanq_work_request"),
		f.count(t, "SELECT COUNT(*) FROM loanq_work"),
		f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE disposition IS NULL"),
		f.count(t, "SELECT COUNT(*) FROM loanq_query_run"),
		f.count(t, "SELECT COUNT(*) FROM loan"))
}

// A wait caller queued on the row lock gives up when its --timeout passes:
// busy, its request still pending, not blocked for as long as the holder holds
// the lock (PostgreSQL has no lock timeout by default).
func TestWaitStrategyHonoursTimeout(t *testing.T) {
	testdb.EachPooled(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 5)
		if !drivers.Supports(f.d, drivers.Wait) {
			t.Skipf("%s has no row locks: the wait strategy does not exist there", f.d.Name())
		}
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "queued", Lock: drivers.Wait})
		// Another session holds the task lock and does not let go.
		tx, err := f.engine(t).DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := f.d.Statements().LockWait.One(ctx, tx, drivers.TaskParams{TaskID: task.ID}); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		var req *dispatch.Request
		go func() {
			defer close(done)
			req, err = f.e.Get(ctx, task.Name, "queued-user", 1, dispatch.GetOptions{Timeout: time.Second, Backoff: fast.Backoff})
		}()
		select {
		case <-done:
		case <-time.After(90 * time.Second):
			t.Fatal("a wait caller with --timeout 1s was still queued on the lock after 90 s")
		}
		if problem.KindOf(err) != problem.Busy || req == nil || req.Status != dispatch.StatusPending {
			t.Fatalf("want busy with a pending request, got %+v, %v", req, err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		got, err := f.e.Status(ctx, req.ID, true, fast)
		if err != nil || got.Status != dispatch.StatusAssigned {
			t.Fatalf("recheck once the lock is free: %+v, %v", got, err)
		}
		f.audit(t)
	})
}

// task delete refuses while work is active, then with force removes the task
// and its whole history, and nothing of any other task.
func TestDeleteTask(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 10)
		ctx := context.Background()
		doomed := f.task(t, dispatch.TaskSpec{Name: "doomed"})
		kept := f.task(t, dispatch.TaskSpec{Name: "kept"})
		for _, name := range []string{"doomed", "kept"} {
			if _, err := f.e.Get(ctx, name, "ana", 2, fast); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.e.DeleteTask(ctx, "doomed", false); problem.KindOf(err) != problem.Usage {
			t.Fatalf("delete with active work: %v, want bad input", err)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ?", doomed.ID); n != 2 {
			t.Fatalf("a refused delete changed the task's work: %d rows", n)
		}
		work, err := f.e.DeleteTask(ctx, "doomed", true)
		if err != nil || work != 2 {
			t.Fatalf("forced delete: %d assignments, %v", work, err)
		}
		for _, table := range []string{"loanq_work", "loanq_work_request", "loanq_query_run"} {
			if n := f.count(t, "SELECT COUNT(*) FROM "+table+" WHERE task_id = ?", doomed.ID); n != 0 {
				t.Errorf("%s still has %d rows of the deleted task", table, n)
			}
			if n := f.count(t, "SELECT COUNT(*) FROM "+table+" WHERE task_id = ?", kept.ID); n == 0 {
				t.Errorf("%s lost the rows of the other task", table)
			}
		}
		if _, err := f.e.Task(ctx, "doomed"); problem.KindOf(err) != problem.Usage {
			t.Fatalf("deleted task still found: %v", err)
		}
		if _, err := f.e.DeleteTask(ctx, "doomed", true); problem.KindOf(err) != problem.Usage {
			t.Fatalf("deleting an unknown task: %v, want bad input", err)
		}
		f.audit(t)
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

// docs/algorithm.md, "The lease strategy": a holder whose lease expired and
// was taken over while its criteria query ran must not commit assignments; the
// new holder serves every pending request, the old holder's included.
func TestLeaseHolderTakenOverCommitsNothing(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 10)
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "fenced", Lock: drivers.Lease})
		other := f.engine(t)
		took := false
		f.e.SetAfterQuery(func() {
			if took {
				return
			}
			took = true
			// The holder stalled past its lease: it expires, and another
			// node takes the task over and serves what is pending.
			testdb.Exec(t, f.d, f.db, "UPDATE loanq_task SET lease_expires_at = created_at WHERE id = ?", task.ID)
			if r, err := other.Get(ctx, task.Name, "other", 1, dispatch.GetOptions{NoWait: true}); err != nil || r.Status != dispatch.StatusAssigned {
				t.Errorf("takeover: %+v, %v", r, err)
			}
		})
		defer f.e.SetAfterQuery(nil)
		r, err := f.e.Get(ctx, task.Name, "stalled", 2, fast)
		if err != nil || r.Status != dispatch.StatusAssigned || len(r.Loans) != 2 {
			t.Fatalf("the stalled holder's own request: %+v, %v (served by the new holder)", r, err)
		}
		if !took {
			t.Fatal("the takeover never happened")
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_query_run WHERE task_id = ? AND holder = ?", task.ID, f.e.Holder); n != 0 {
			t.Fatalf("the holder whose lease was taken over committed %d criteria-query run(s)", n)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ?", task.ID); n != 3 {
			t.Fatalf("%d work rows, want 3 (2 + 1, all from the new holder)", n)
		}
		f.audit(t)
	})
}

// A disposition that changes nothing says why, with exit 2, and changes
// nothing: the loan is someone else's (named), was never assigned in the
// task, or its last assignment already ended (named, with its disposition);
// a loan completed and then assigned to another user is that user's.
func TestDisposeExplainsRefusal(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 2)
		ctx := context.Background()
		f.task(t, dispatch.TaskSpec{Name: "refuse", Order: "id"})
		if r, err := f.e.Get(ctx, "refuse", "oliver", 2, fast); err != nil || fmt.Sprint(r.Loans) != "[1 2]" {
			t.Fatalf("get: %+v, %v", r, err)
		}
		refused := func(loan any, user, want string) {
			t.Helper()
			before := snapshot(t, f)
			_, err := f.e.Dispose(ctx, "refuse", fmt.Sprint(loan), user, dispatch.Complete, 0, false)
			if err == nil || problem.ExitCode(err) != problem.ExitUsage || !strings.Contains(err.Error(), want) {
				t.Fatalf("dispose %d by %s: %v (exit %d); want exit 2 saying %q", loan, user, err, problem.ExitCode(err), want)
			}
			if after := snapshot(t, f); after != before {
				t.Fatalf("a refused disposition changed the database:\nbefore %s\nafter  %s", before, after)
			}
		}
		refused(1, "tracy", "loan 1 in task refuse is assigned to oliver, not to tracy")
		refused(3, "oliver", "loan 3 has never been assigned in task refuse")
		if _, err := f.e.Dispose(ctx, "refuse", "1", "oliver", dispatch.Never, 0, false); err != nil {
			t.Fatal(err)
		}
		refused(1, "oliver", "loan 1 in task refuse is not active: its last assignment (to oliver) was already dispositioned never")
		if _, err := f.e.Dispose(ctx, "refuse", "2", "oliver", dispatch.Complete, 0, false); err != nil {
			t.Fatal(err)
		}
		if r, err := f.e.Get(ctx, "refuse", "tracy", 1, fast); err != nil || fmt.Sprint(r.Loans) != "[2]" {
			t.Fatalf("get after complete: %+v, %v", r, err)
		}
		refused(2, "oliver", "loan 2 in task refuse is assigned to tracy, not to oliver")
		d, err := f.e.Dispose(ctx, "refuse", "2", "tracy", dispatch.Return, time.Hour, true)
		if err != nil || d.Task != "refuse" || d.LoanID.String() != "2" || d.User != "tracy" || d.Disposition != dispatch.Return || d.AfterMS != time.Hour.Milliseconds() {
			t.Fatalf("dispose by the assignee: %+v, %v", d, err)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE disposition IS NULL"); n != 0 {
			t.Fatalf("%d assignments still active", n)
		}
		f.audit(t)
	})
}

// An engine that disposed in a task remembers its id; the task deleted and
// created again under its name is a new task, and the disposition finds it,
// and a deleted task is unknown.
func TestDisposeAfterTaskRecreated(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 2)
		ctx := context.Background()
		cycle := func() {
			t.Helper()
			f.task(t, dispatch.TaskSpec{Name: "again"})
			r, err := f.e.Get(ctx, "again", "oliver", 1, fast)
			if err != nil || len(r.Loans) != 1 {
				t.Fatalf("get: %+v, %v", r, err)
			}
			if d, err := f.e.Dispose(ctx, "again", r.Loans[0].String(), "oliver", dispatch.Complete, 0, false); err != nil || d.Task != "again" {
				t.Fatalf("dispose: %+v, %v", d, err)
			}
			if n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE disposition IS NULL"); n != 0 {
				t.Fatalf("%d assignments still active", n)
			}
		}
		cycle()
		if _, err := f.e.DeleteTask(ctx, "again", false); err != nil {
			t.Fatal(err)
		}
		_, err := f.e.Dispose(ctx, "again", "1", "oliver", dispatch.Complete, 0, false)
		if problem.ExitCode(err) != problem.ExitUsage || !strings.Contains(err.Error(), `unknown task "again"`) {
			t.Fatalf("dispose in a deleted task: %v", err)
		}
		cycle()
		if _, err := f.e.DeleteTask(ctx, "again", false); err != nil {
			t.Fatal(err)
		}
		// Created again by another engine: this one still knows the old id.
		other := f.engine(t)
		if _, _, err := other.CreateTask(ctx, dispatch.TaskSpec{Name: "again", Where: "eligible = 1", Order: "priority", CreatedBy: "admin"}); err != nil {
			t.Fatal(err)
		}
		r, err := other.Get(ctx, "again", "oliver", 1, fast)
		if err != nil || len(r.Loans) != 1 {
			t.Fatalf("get: %+v, %v", r, err)
		}
		if _, err := f.e.Dispose(ctx, "again", r.Loans[0].String(), "oliver", dispatch.Complete, 0, false); err != nil {
			t.Fatalf("dispose in the task created again: %v", err)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE disposition IS NULL"); n != 0 {
			t.Fatalf("%d assignments still active", n)
		}
	})
}
