package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"
)

// A waiter is woken by the holder's commit, not by its timer: with a 60 s
// recheck step, a caller that arrives while the holder runs its ~1 s query
// returns assigned long before 60 s, on every strategy with a task lock.
func TestWaiterWokenByHolderCommit(t *testing.T) {
	testdb.EachPooled(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 20)
		ctx := context.Background()
		for _, s := range f.d.Capabilities().Strategies {
			if s == drivers.Rows {
				continue // no task lock, nobody waits
			}
			t.Run(string(s), func(t *testing.T) {
				task := f.task(t, dispatch.TaskSpec{Name: "wake-" + string(s), Lock: s, QueryDelay: 1200 * time.Millisecond})
				holder, waiter := f.engine(t), f.engine(t)
				slow := dispatch.GetOptions{Backoff: []time.Duration{60 * time.Second}, Timeout: 2 * time.Minute}
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					if r, err := holder.Get(ctx, task.Name, "holder", 1, slow); err != nil || r.Status != dispatch.StatusAssigned {
						t.Errorf("holder: %+v, %v", r, err)
					}
				}()
				// The holder has logged its request and is in its query.
				deadline := time.Now().Add(time.Minute)
				for f.count(t, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ?", task.ID) == 0 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				time.Sleep(300 * time.Millisecond)
				t0 := time.Now()
				r, err := waiter.Get(ctx, task.Name, "waiter", 1, slow)
				took := time.Since(t0)
				wg.Wait()
				if err != nil || r.Status != dispatch.StatusAssigned {
					t.Fatalf("waiter: %+v, %v", r, err)
				}
				if took > 30*time.Second {
					t.Fatalf("the waiter returned after %s: it slept on its 60 s timer instead of being woken", took)
				}
				t.Logf("%s: waiter answered after %s", s, took.Round(time.Millisecond))
				f.audit(t)
			})
		}
	})
}

// A waiter whose request the holder did not serve (it was logged after the
// holder read the pending requests, and the holder does not look again) is
// granted the lock at the holder's commit, finds its request still pending
// and serves it itself, still long before its 60 s timer: on PostgreSQL and
// MySQL/MariaDB it first waits in share mode, then queues exclusively.
func TestWaiterServesWhatTheHolderLeft(t *testing.T) {
	testdb.EachPooled(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 20)
		ctx := context.Background()
		for _, s := range f.d.Capabilities().Strategies {
			if s == drivers.Rows {
				continue // no task lock, nobody waits
			}
			t.Run(string(s), func(t *testing.T) {
				if f.d.Name() == "sqlite" {
					t.Skip("SQLite has one writer at a time: no request can be logged while the holder's assignment transaction is open")
				}
				task := f.task(t, dispatch.TaskSpec{Name: "left-" + string(s), Lock: s})
				holder, waiter := f.engine(t), f.engine(t)
				holder.MaxRounds = 1 // no second look after the commit
				slow := dispatch.GetOptions{Backoff: []time.Duration{60 * time.Second}, Timeout: 2 * time.Minute}
				type answer struct {
					r    *dispatch.Request
					err  error
					took time.Duration
				}
				done := make(chan answer, 1)
				var once sync.Once
				holder.SetBeforeCommit(func() {
					once.Do(func() {
						// The waiter logs its request now, finds the lock
						// held and queues; the holder commits a little later.
						go func() {
							t0 := time.Now()
							r, err := waiter.Get(ctx, task.Name, "waiter", 1, slow)
							done <- answer{r, err, time.Since(t0)}
						}()
						deadline := time.Now().Add(time.Minute)
						for f.count(t, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ? AND user_name = 'waiter'", task.ID) == 0 && time.Now().Before(deadline) {
							time.Sleep(10 * time.Millisecond)
						}
						time.Sleep(500 * time.Millisecond)
					})
				})
				r, err := holder.Get(ctx, task.Name, "holder", 1, slow)
				if err != nil || r.Status != dispatch.StatusAssigned {
					t.Fatalf("holder: %+v, %v", r, err)
				}
				a := <-done
				if a.err != nil || a.r.Status != dispatch.StatusAssigned || len(a.r.Loans) != 1 {
					t.Fatalf("waiter: %+v, %v", a.r, a.err)
				}
				if a.took > 30*time.Second {
					t.Fatalf("the waiter returned after %s: it slept on its 60 s timer", a.took)
				}
				runs := f.count(t, "SELECT COUNT(*) FROM loanq_query_run WHERE task_id = ?", task.ID)
				if runs != 2 {
					t.Fatalf("%d criteria runs; want 2 (the holder's, then the waiter's for its own request)", runs)
				}
				f.audit(t)
			})
		}
	})
}

// Heartbeat: a lease holder whose criteria query outlasts several TTLs keeps
// its lease (nobody else gets it meanwhile) and commits.
func TestLeaseHeartbeatOutlastsTTL(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 50)
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "beat", Lock: drivers.Lease, LeaseTTL: 2 * time.Second, QueryDelay: 7 * time.Second})
		var renewals atomic.Int64
		f.e.SetRenewed(func() { renewals.Add(1) })
		done := make(chan error, 1)
		var got *dispatch.Request
		go func() {
			r, err := f.e.Get(ctx, task.Name, "holder", 2, dispatch.GetOptions{NoWait: true})
			got = r
			done <- err
		}()
		other := f.engine(t)
		tried := 0
	probe:
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("holder: %v", err)
				}
				break probe
			case <-time.After(200 * time.Millisecond):
			}
			if f.count(t, "SELECT COUNT(*) FROM loanq_task WHERE id = ? AND lease_owner IS NOT NULL", task.ID) == 0 {
				continue // not taken yet, or already released
			}
			// While the holder works, the lease is never free to another.
			r, err := other.Get(ctx, task.Name, "other", 1, dispatch.GetOptions{NoWait: true})
			if err == nil && r.Status != dispatch.StatusPending {
				// Served by the holder's run (it re-reads pending requests),
				// which is fine; a run by other is not (checked below).
				continue
			}
			if problem.KindOf(err) != problem.Busy {
				t.Fatalf("other caller during the holder's query: %+v, %v", r, err)
			}
			tried++
		}
		if got == nil || got.Status != dispatch.StatusAssigned || len(got.Loans) != 2 {
			t.Fatalf("the holder whose query outlasted its 2 s TTL three times: %+v", got)
		}
		if renewals.Load() < 3 {
			t.Errorf("%d lease renewals during a 7 s query with a 2 s TTL, want at least 3", renewals.Load())
		}
		if tried == 0 {
			t.Errorf("no other caller found the lease held during the query")
		}
		// A probe may take the lease once the holder has released it; none
		// may commit a run before the holder's (logged at its commit).
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_query_run WHERE task_id = ? AND holder = ?", task.ID, f.e.Holder); n < 1 {
			t.Fatalf("the holder logged no criteria-query run")
		}
		if n := f.count(t, `SELECT COUNT(*) FROM loanq_query_run WHERE task_id = ? AND holder <> ?
  AND id < (SELECT MIN(id) FROM loanq_query_run WHERE task_id = ? AND holder = ?)`, task.ID, f.e.Holder, task.ID, f.e.Holder); n != 0 {
			t.Errorf("%d criteria-query run(s) by another caller while the holder held a renewed lease", n)
		}
		f.audit(t)
	})
}

// takeLease makes owner hold the task's lease for ttl, as a holder that then
// stopped (crashed) would have left it.
func takeLease(t *testing.T, f *fixture, taskID int64, owner string, ttl time.Duration) {
	t.Helper()
	res, err := f.d.Statements().LeaseAcquire.Exec(context.Background(), f.db, engineio.LeaseTakeParams{Owner: owner, TTLMS: ttl.Milliseconds(), TaskID: taskID})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatal("could not take the lease for the test")
	}
}

// A lease whose holder ran on this host and whose process is gone is taken
// over at once; one held from another host only after its TTL.
func TestDeadLeaseHolder(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 10)
		ctx := context.Background()
		host, err := os.Hostname()
		if err != nil {
			t.Fatal(err)
		}
		gone := exec.Command("true")
		if err := gone.Run(); err != nil {
			t.Fatal(err)
		}
		opt := dispatch.GetOptions{Backoff: []time.Duration{60 * time.Second}, Timeout: time.Minute}

		t.Run("same host, process gone", func(t *testing.T) {
			task := f.task(t, dispatch.TaskSpec{Name: "dead-here", Lock: drivers.Lease, LeaseTTL: 10 * time.Minute})
			takeLease(t, f, task.ID, fmt.Sprintf("%s:%d:dead", host, gone.Process.Pid), 10*time.Minute)
			t0 := time.Now()
			r, err := f.e.Get(ctx, task.Name, "next", 1, opt)
			if err != nil || r.Status != dispatch.StatusAssigned {
				t.Fatalf("after a dead same-host holder: %+v, %v", r, err)
			}
			if took := time.Since(t0); took > 30*time.Second {
				t.Fatalf("served after %s: the dead holder's 10-minute lease was waited out", took)
			}
		})
		t.Run("same host, process alive", func(t *testing.T) {
			task := f.task(t, dispatch.TaskSpec{Name: "alive-here", Lock: drivers.Lease})
			alive := exec.Command("sleep", "60")
			if err := alive.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = alive.Process.Kill(); _ = alive.Wait() }()
			takeLease(t, f, task.ID, fmt.Sprintf("%s:%d:live", host, alive.Process.Pid), 10*time.Minute)
			r, err := f.e.Get(ctx, task.Name, "next", 1, dispatch.GetOptions{NoWait: true})
			if problem.KindOf(err) != problem.Busy {
				t.Fatalf("a live holder's lease was taken: %+v, %v", r, err)
			}
			// The holder's process dies: a waiting recheck sees it and serves.
			_ = alive.Process.Kill()
			_ = alive.Wait()
			t0 := time.Now()
			got, err := f.e.Status(ctx, r.ID, true, opt)
			if err != nil || got.Status != dispatch.StatusAssigned || time.Since(t0) > 30*time.Second {
				t.Fatalf("recheck after the holder's process died: %+v, %v after %s", got, err, time.Since(t0))
			}
		})
		t.Run("other host", func(t *testing.T) {
			task := f.task(t, dispatch.TaskSpec{Name: "dead-elsewhere", Lock: drivers.Lease})
			takeLease(t, f, task.ID, "elsewhere-"+host+":1:far", 2*time.Second)
			t0 := time.Now()
			r, err := f.e.Get(ctx, task.Name, "next", 1, opt)
			took := time.Since(t0)
			if err != nil || r.Status != dispatch.StatusAssigned {
				t.Fatalf("after another host's lease expired: %+v, %v", r, err)
			}
			if took < time.Second || took > 30*time.Second {
				t.Fatalf("served after %s: want after the 2 s TTL, and woken soon after it (not by the 60 s timer)", took)
			}
		})
		f.audit(t)
	})
}

// rows: a request is served by its own caller, never by another's claim.
func TestRowsLateRequestServedByItsCaller(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 10)
		if !drivers.Supports(f.d, drivers.Rows) {
			t.Skipf("%s has no row locks: no rows strategy", f.d.Name())
		}
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "own", Lock: drivers.Rows})
		other := f.engine(t)
		var late *dispatch.Request
		f.e.SetAfterQuery(func() {
			if late != nil {
				return
			}
			// Another caller asks while this one holds its claimed rows.
			r, err := other.Get(ctx, task.Name, "late", 2, dispatch.GetOptions{NoWait: true})
			if err != nil {
				t.Errorf("late caller: %v", err)
			}
			late = r
		})
		defer f.e.SetAfterQuery(nil)
		r, err := f.e.Get(ctx, task.Name, "first", 2, dispatch.GetOptions{NoWait: true})
		if err != nil || fmt.Sprint(r.Loans) != "[1 2]" {
			t.Fatalf("first caller: %+v, %v", r, err)
		}
		if late == nil || fmt.Sprint(late.Loans) != "[3 4]" {
			t.Fatalf("the late caller, skipping the first one's locked rows: %+v", late)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_query_run WHERE task_id = ? AND requests_served = 1", task.ID); n != 2 {
			t.Fatalf("%d claims logged serving one request each, want 2", n)
		}
		f.audit(t)
	})
}

// rows: a loan another caller was assigned and set to never AFTER the claim's
// snapshot was taken, but BEFORE the claim reached and locked its row (the
// other caller holds no lock on it by then), is not assigned by the claim:
// the claim's NOT EXISTS saw the old snapshot; the recheck after the lock
// sees the commit. The criteria sleeps in the claim's scan, before it locks
// the row, to hold that window open.
func TestRowsClaimRechecksAfterLock(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 1)
		if !drivers.Supports(f.d, drivers.Rows) {
			t.Skipf("%s has no row locks: no rows strategy", f.d.Name())
		}
		ctx := context.Background()
		slow := map[string]string{"postgres": "(SELECT 1 FROM pg_sleep(1.5)) = 1", "mysql": "SLEEP(1.5) = 0"}[f.d.Name()]
		if slow == "" {
			t.Fatalf("no sleep function known for %s", f.d.Name())
		}
		task := f.task(t, dispatch.TaskSpec{Name: "recheck", Lock: drivers.Rows, Where: "eligible = 1 AND " + slow})
		type answer struct {
			r   *dispatch.Request
			err error
		}
		done := make(chan answer, 1)
		go func() {
			r, err := f.engine(t).Get(ctx, task.Name, "late", 1, fast)
			done <- answer{r, err}
		}()
		// The claim is in its locking read (seen running from another
		// session: its request is logged in its own transaction, invisible
		// until it commits), sleeping in its scan before it reaches the only
		// loan's row; another caller gets that loan and sets it to never,
		// each committed at once.
		deadline := time.Now().Add(time.Minute)
		for !testdb.StatementRunning(t, f.d, f.db, "SKIP LOCKED") {
			if time.Now().After(deadline) {
				t.Fatal("the claim's locking read never ran")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ?", task.ID); n != 0 {
			t.Fatalf("%d requests visible while the claim runs: a rows claim logs its request in its own transaction", n)
		}
		time.Sleep(400 * time.Millisecond)
		st := f.d.Statements()
		early, err := st.RequestInsert.InsertID(ctx, f.db, engineio.RequestInsertParams{TaskID: task.ID, User: "early", Requested: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.WorkInsertMany.Exec(ctx, f.db, engineio.WorkInsertManyParams{TaskID: task.ID, Assignments: fmt.Sprintf(`[[1,%d,"early"]]`, early)}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RequestFinish.Exec(ctx, f.db, engineio.RequestFinishParams{Assigned: 1, Status: dispatch.StatusAssigned, ID: early}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.e.Dispose(ctx, task.Name, "1", "early", dispatch.Never, 0, false); err != nil {
			t.Fatal(err)
		}
		a := <-done
		if a.err != nil {
			t.Fatal(a.err)
		}
		if a.r.Status != dispatch.StatusEmpty || len(a.r.Loans) != 0 {
			t.Fatalf("the claim answered %s %v: it assigned a loan set to never after its snapshot", a.r.Status, a.r.Loans)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND loan_id = '1'", task.ID); n != 1 {
			t.Fatalf("loan 1 has %d work rows in the task; want 1 (the never)", n)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ? AND user_name = 'late' AND status = 'empty' AND id = ?", task.ID, a.r.ID); n != 1 {
			t.Fatalf("the claim's request %d is not logged empty", a.r.ID)
		}
		f.audit(t)
	})
}

// rows: a loan another caller assigned after this claim's snapshot (its work
// row commits while the claim holds the loan's row lock) is skipped and
// replaced by the next one, never an error.
func TestRowsConflictIsSkippedAndReplaced(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 10)
		if !drivers.Supports(f.d, drivers.Rows) {
			t.Skipf("%s has no row locks: no rows strategy", f.d.Name())
		}
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "conflict", Lock: drivers.Rows})
		// A request of another caller to hang the competing work row on.
		otherReq, err := f.d.Statements().RequestInsert.InsertID(ctx, f.db, engineio.RequestInsertParams{TaskID: task.ID, User: "rival", Requested: 1})
		if err != nil {
			t.Fatal(err)
		}
		// The rival's transaction inserts an active work row for loan 1 (the
		// top loan) without locking the loan's row, and commits only once
		// the claim below has locked loan 1 and tries to insert it.
		rival, err := f.engine(t).DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rival.Rollback()
		if _, err := f.d.Statements().WorkInsertMany.Exec(ctx, rival, engineio.WorkInsertManyParams{TaskID: task.ID, Assignments: fmt.Sprintf(`[[1,%d,"rival"]]`, otherReq)}); err != nil {
			t.Fatal(err)
		}
		// Once: where one statement ends the claim (PostgreSQL), the claim
		// that lost loan 1 rolls back and claims again, running its
		// criteria query (and this hook) a second time.
		var once sync.Once
		f.e.SetAfterQuery(func() {
			once.Do(func() {
				go func() {
					time.Sleep(500 * time.Millisecond)
					if err := rival.Commit(); err != nil && !errors.Is(err, context.Canceled) {
						t.Errorf("rival commit: %v", err)
					}
				}()
			})
		})
		defer f.e.SetAfterQuery(nil)
		r, err := f.e.Get(ctx, task.Name, "claimer", 2, dispatch.GetOptions{NoWait: true})
		if err != nil {
			t.Fatalf("the claim that met the rival's loan: %v", err)
		}
		testdb.Exec(t, f.d, f.db, "UPDATE loanq_work_request SET status = 'assigned', assigned = 1, served_at = created_at WHERE id = ?", otherReq)
		if r.Status != dispatch.StatusAssigned || fmt.Sprint(r.Loans) != "[2 3]" {
			t.Fatalf("claim: %+v; want loans [2 3] (loan 1 went to the rival, replaced by 3)", r)
		}
		f.audit(t)
	})
}

// task create --lock rows: refused on SQLite naming the strategies it has,
// and refused where the source cannot be locked row by row, saying why.
func TestRowsCreateChecks(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 10)
		ctx := context.Background()
		spec := dispatch.TaskSpec{Name: "r", Where: "eligible = 1", Lock: drivers.Rows, CreatedBy: "admin"}
		if !drivers.Supports(f.d, drivers.Rows) {
			_, _, err := f.e.Admin().CreateTask(ctx, spec)
			if problem.KindOf(err) != problem.Usage || !containsAll(err.Error(), "rows", "lease") {
				t.Fatalf("--lock rows on %s: %v; want bad input naming the strategies it has", f.d.Name(), err)
			}
			return
		}
		testdb.Exec(t, f.d, f.db, "CREATE VIEW loan_grouped AS SELECT MIN(id) AS id, priority, MIN(eligible) AS eligible FROM loan GROUP BY priority")
		spec.Source = "loan_grouped"
		_, _, err := f.e.Admin().CreateTask(ctx, spec)
		if problem.KindOf(err) != problem.Usage || !containsAll(err.Error(), "cannot be locked row by row") {
			t.Fatalf("--lock rows over a GROUP BY view: %v; want bad input saying why", err)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_task"); n != 0 {
			t.Fatalf("a refused task was stored (%d tasks)", n)
		}
		spec.Source = "loan"
		if _, created, err := f.e.Admin().CreateTask(ctx, spec); err != nil || !created {
			t.Fatalf("--lock rows over the loan table: %v", err)
		}
	})
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
