package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// The candidate pool (docs/algorithm.md, "The candidate pool"), on every
// database under test.

func poolSize(t *testing.T, f *fixture, task *dispatch.Task) int {
	t.Helper()
	p, err := f.e.Pool(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	return p.Size
}

// A get of a prefetch task is served from the pool without a criteria run,
// in the criteria order, and marked as a pool hit.
func TestPoolServesWithoutQuery(t *testing.T) {
	testdb.EachSerial(t, func(t *testing.T, dsn string) { // serial: a pool get is timed
		f := setup(t, dsn, 60)
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "heavy", Prefetch: 20, QueryDelay: 400 * time.Millisecond})
		first, err := f.e.Get(ctx, "heavy", "ana", 2, fast)
		if err != nil || first.Status != dispatch.StatusAssigned || fmt.Sprint(first.Loans) != "[1 2]" {
			t.Fatalf("first get: %+v, %v; want loans 1 and 2 through a criteria run", first, err)
		}
		if n := poolSize(t, f, task); n != 20 {
			t.Fatalf("pool after the first run: %d candidates, want 20", n)
		}
		start := time.Now()
		second, err := f.e.Get(ctx, "heavy", "bob", 3, fast)
		took := time.Since(start)
		if err != nil || second.Status != dispatch.StatusAssigned || fmt.Sprint(second.Loans) != "[3 4 5]" {
			t.Fatalf("pool get: %+v, %v; want loans 3, 4, 5 in the criteria order", second, err)
		}
		if took >= 400*time.Millisecond {
			t.Errorf("a pool get took %s: it waited for a query (--query-delay 400ms)", took)
		}
		if runs := f.count(t, "SELECT COUNT(*) FROM loanq_query_run WHERE task_id = ?", task.ID); runs != 1 {
			t.Errorf("%d criteria runs, want 1 (the second get came from the pool)", runs)
		}
		if hits := f.count(t, "SELECT COUNT(*) FROM loanq_work_request WHERE pooled = 1 AND id = ?", second.ID); hits != 1 {
			t.Errorf("the pool get is not recorded as a pool hit")
		}
		if n := poolSize(t, f, task); n != 17 {
			t.Errorf("pool after a claim of 3: %d, want 17", n)
		}
		f.audit(t)
	})
}

// Candidates made ineligible after the refill are dropped, never handed out:
// criteria no longer matching, assigned in the task, never, returned with a
// future time.
func TestPoolDropsStaleCandidates(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 40)
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "heavy", Prefetch: 30})
		if r, err := f.e.Get(ctx, "heavy", "ana", 1, fast); err != nil || fmt.Sprint(r.Loans) != "[1]" {
			t.Fatalf("first get: %+v, %v", r, err)
		}
		// Loans 2..31 are pooled. Make 2, 3, 4, 5 ineligible behind the pool's back.
		testdb.Exec(t, f.d, f.db, "UPDATE loan SET eligible = 0 WHERE id = 2")
		st := f.d.Statements()
		req, err := st.RequestInsert.InsertID(ctx, f.db, engineio.RequestInsertParams{TaskID: task.ID, User: "zoe", Requested: 3})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.WorkInsertMany.Exec(ctx, f.db, engineio.WorkInsertManyParams{TaskID: task.ID,
			Assignments: fmt.Sprintf(`[[3,%d,"zoe"],[4,%d,"zoe"],[5,%d,"zoe"]]`, req, req, req)}); err != nil {
			t.Fatal(err)
		}
		for _, d := range []struct {
			loan   int64
			action string
			after  time.Duration
		}{{4, dispatch.Never, 0}, {5, dispatch.Return, time.Hour}} {
			if _, err := f.e.Dispose(ctx, "heavy", fmt.Sprint(d.loan), "zoe", d.action, d.after, d.action == dispatch.Return); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := st.RequestFinish.Exec(ctx, f.db, engineio.RequestFinishParams{ID: req, Assigned: 3, Status: "assigned"}); err != nil {
			t.Fatal(err)
		}
		// Loan 3 stays active (zoe's); 4 is never; 5 comes back in an hour.
		got, err := f.e.Get(ctx, "heavy", "bob", 5, fast)
		if err != nil || got.Status != dispatch.StatusAssigned || fmt.Sprint(got.Loans) != "[6 7 8 9 10]" {
			t.Fatalf("pool get after the candidates went stale: %+v, %v; want 6..10 (2..5 dropped)", got, err)
		}
		if runs := f.count(t, "SELECT COUNT(*) FROM loanq_query_run WHERE task_id = ?", task.ID); runs != 1 {
			t.Errorf("%d criteria runs: the stale candidates made the get fall back to a query", runs)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_pool WHERE task_id = ? AND loan_id IN ('1','2','3','4','5','6','7','8','9','10')", task.ID); n != 0 {
			t.Errorf("%d claimed candidates (assigned or stale) left in the pool", n)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE user_name = 'bob' AND loan_id IN ('2','3','4','5')"); n != 0 {
			t.Errorf("a stale candidate was handed out")
		}
		f.audit(t)
	})
}

// Many engines (as on several nodes) claim from one pool while refills run:
// no loan is active twice, every get is answered, and statuses tell the
// truth (empty only once nothing eligible remains).
func TestPoolConcurrentClaimsAndRefills(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 150)
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "heavy", Prefetch: 25, QueryDelay: 30 * time.Millisecond})
		stop := make(chan struct{})
		var refills sync.WaitGroup
		refills.Add(1)
		go func() {
			defer refills.Done()
			e := f.engine(t)
			for {
				select {
				case <-stop:
					return
				case <-time.After(15 * time.Millisecond):
				}
				if _, err := e.Refill(ctx, task, true); err != nil {
					t.Errorf("refill: %v", err)
					return
				}
			}
		}()
		const callers, gets = 10, 12
		var wg sync.WaitGroup
		var mu sync.Mutex
		handed := map[loankey.Key]string{}
		for c := 0; c < callers; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				e := f.engine(t)
				user := fmt.Sprintf("p%02d", c)
				for i := 0; i < gets; i++ {
					r, err := e.Get(ctx, "heavy", user, 2, fast)
					if err != nil {
						t.Errorf("%s get %d: %v", user, i, err)
						return
					}
					mu.Lock()
					for _, l := range r.Loans {
						if who, dup := handed[l]; dup {
							t.Errorf("loan %s handed to %s and %s", l, who, user)
						}
						handed[l] = user
					}
					mu.Unlock()
				}
			}(c)
		}
		wg.Wait()
		close(stop)
		refills.Wait()
		if len(handed) != 150 {
			t.Errorf("%d of 150 loans handed out to 10 callers asking for 240", len(handed))
		}
		// A round finishes its requests before it inserts their work, so
		// requests are compared with requests: none got loans after one was
		// told empty (no loan came back: nothing was disposed of).
		if n := f.count(t, `SELECT COUNT(*) FROM loanq_work_request e WHERE e.task_id = ? AND e.status = 'empty'
  AND EXISTS (SELECT 1 FROM loanq_work_request g WHERE g.task_id = e.task_id AND g.assigned > 0 AND g.served_at > e.served_at)`, task.ID); n != 0 {
			t.Errorf("%d requests answered empty before others got loans", n)
		}
		// Order. The exact statement — per refill generation, the loans
		// handed out are a prefix of the criteria order less the dropped
		// ones — does not hold under concurrency, so it is not asserted: a
		// claim skips pool rows another claim holds (SKIP LOCKED), and that
		// claim may roll back and give them back to be handed out after
		// later ones; a claim's second round may take a row of a lower
		// position freed meanwhile; a round assigns around the rows claims
		// hold. What holds, and is asserted on the final state: every loan
		// handed out was eligible when it was handed out (nothing here
		// changes eligibility, so eligible now; and not active: no loan has
		// two work rows, none was disposed of), and every request's count
		// matches its work rows.
		eligible, err := drivers.ScanKeys(f.db.Query("SELECT id FROM loan WHERE eligible = 1"))
		if err != nil {
			t.Fatal(err)
		}
		isEligible := map[string]bool{}
		for _, k := range eligible {
			isEligible[k] = true
		}
		work, err := drivers.ScanKeys(f.db.Query(testdb.Rebind(f.d, "SELECT loan_id FROM loanq_work WHERE task_id = ?"), task.ID))
		if err != nil {
			t.Fatal(err)
		}
		once := map[string]bool{}
		for _, k := range work {
			if !isEligible[k] {
				t.Errorf("loan %s handed out but not eligible", k)
			}
			if once[k] {
				t.Errorf("loan %s handed out twice", k)
			}
			once[k] = true
		}
		if len(work) != 150 {
			t.Errorf("%d work rows, want 150", len(work))
		}
		if n := f.count(t, `SELECT COUNT(*) FROM loanq_work_request r WHERE r.task_id = ?
  AND r.assigned <> (SELECT COUNT(*) FROM loanq_work w WHERE w.request_id = r.id)`, task.ID); n != 0 {
			t.Errorf("%d requests whose assigned count differs from their work rows", n)
		}
		hits := f.count(t, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ? AND pooled = 1", task.ID)
		t.Logf("%d of %d gets served from the pool", hits, callers*gets)
		if hits == 0 {
			t.Errorf("no get was served from the pool")
		}
		f.audit(t)
	})
}

// The cap, attaching to a pending request and --max-hold hold with a pool.
func TestPoolCapAttachAndMaxHold(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 60)
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "heavy", Prefetch: 20, MaxActive: 2, MaxHold: time.Second})
		if r, err := f.e.Get(ctx, "heavy", "ana", 1, fast); err != nil || r.Assigned != 1 {
			t.Fatalf("filling get: %+v, %v", r, err)
		}
		// The cap: ana holds 1 of 2.
		r, err := f.e.Get(ctx, "heavy", "ana", 5, fast)
		if err != nil || r.Status != dispatch.StatusPartial || r.Assigned != 1 {
			t.Fatalf("capped pool get: %+v, %v; want partial 1 (cap 2, 1 held)", r, err)
		}
		r, err = f.e.Get(ctx, "heavy", "ana", 1, fast)
		if err != nil || r.Status != dispatch.StatusEmpty {
			t.Fatalf("get at the cap: %+v, %v; want empty", r, err)
		}
		// Attach: bob's pending request (logged by hand) is the one served.
		pending, err := f.d.Statements().RequestInsert.InsertID(ctx, f.db, engineio.RequestInsertParams{TaskID: task.ID, User: "bob", Requested: 2})
		if err != nil {
			t.Fatal(err)
		}
		r, err = f.e.Get(ctx, "heavy", "bob", 1, fast)
		if err != nil || r.ID != pending || !r.Attached || r.Assigned != 2 {
			t.Fatalf("get with a pending request: %+v, %v; want request %d attached and served with 2", r, err, pending)
		}
		// Max hold: ana's work, older than 1 s, returns when carl claims from the pool.
		time.Sleep(1200 * time.Millisecond)
		if r, err := f.e.Get(ctx, "heavy", "carl", 1, fast); err != nil || r.Assigned != 1 {
			t.Fatalf("carl's get: %+v, %v", r, err)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND user_name = 'ana' AND disposition = 'expired'", task.ID); n != 2 {
			t.Errorf("ana's work past the max hold: %d expired, want 2", n)
		}
		f.audit(t)
	})
}

// A claim that dies before its commit (here: its context cancelled at the
// commit, as a killed process's connection is closed) leaves nothing:
// no request, no work, every candidate still in the pool and claimable.
func TestPoolClaimKilledLosesNothing(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 30)
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "heavy", Prefetch: 10})
		if _, err := f.e.Get(ctx, "heavy", "ana", 1, fast); err != nil {
			t.Fatal(err)
		}
		victim := f.engine(t)
		cctx, cancel := context.WithCancel(ctx)
		victim.SetBeforeCommit(cancel)
		if _, err := victim.Get(cctx, "heavy", "bob", 3, fast); err == nil || !errors.Is(err, context.Canceled) && cctx.Err() == nil {
			t.Fatalf("the killed claim returned %v", err)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work_request WHERE user_name = 'bob'"); n != 0 {
			t.Errorf("the killed claim left %d requests", n)
		}
		// The rollback of a cancelled transaction may finish a moment after
		// the call returned: wait for the candidates to be claimable again.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) && poolSize(t, f, task) != 10 {
			time.Sleep(20 * time.Millisecond)
		}
		if n := poolSize(t, f, task); n != 10 {
			t.Errorf("pool after the killed claim: %d, want all 10 candidates back", n)
		}
		time.Sleep(100 * time.Millisecond) // the locks go with the rollback's end
		r, err := f.e.Get(ctx, "heavy", "carl", 3, fast)
		if err != nil || fmt.Sprint(r.Loans) != "[2 3 4]" {
			t.Fatalf("after the killed claim: %+v, %v; want 2, 3, 4 from the pool", r, err)
		}
		f.audit(t)
	})
}

// A pool claim that finds the pool's fresh candidates held — by a round
// replacing the pool, which locks every row nobody claims between its query
// and its commit — waits a moment for them instead of falling back to a
// criteria query (the tail of the pool scenario with a refresher on
// MariaDB). Here another transaction holds every pool row for 150 ms: the
// get is served from the pool, well within the 1.5 s query, with no
// criteria run. SQLite has no row locks: its single writer queues the claim
// behind any writer anyway.
func TestPoolClaimWaitsForHeldCandidates(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 60)
		if !drivers.Supports(f.d, drivers.Rows) {
			t.Skipf("%s has no row locks: a writer holds the whole database", f.d.Name())
		}
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "heavy", Prefetch: 20, QueryDelay: 1500 * time.Millisecond})
		if r, err := f.e.Get(ctx, "heavy", "ana", 1, fast); err != nil || fmt.Sprint(r.Loans) != "[1]" {
			t.Fatalf("first get: %+v, %v", r, err)
		}
		_, db := testdb.Open(t, dsn)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		held, err := drivers.ScanIDs(tx.QueryContext(ctx, testdb.Rebind(f.d, "SELECT loan_id FROM loanq_pool WHERE task_id = ? FOR UPDATE"), task.ID))
		if err != nil || len(held) != 20 {
			t.Fatalf("holding the pool: %v %v", held, err)
		}
		go func() {
			time.Sleep(150 * time.Millisecond)
			_ = tx.Rollback()
		}()
		start := time.Now()
		r, err := f.e.Get(ctx, "heavy", "bob", 1, fast)
		took := time.Since(start)
		if err != nil || r.Status != dispatch.StatusAssigned || fmt.Sprint(r.Loans) != "[2]" {
			t.Fatalf("get while the pool was held: %+v, %v; want loan 2 from the pool", r, err)
		}
		if runs := f.count(t, "SELECT COUNT(*) FROM loanq_query_run WHERE task_id = ?", task.ID); runs != 1 {
			t.Errorf("%d criteria runs, want 1: the get fell back to a query instead of waiting %s for the held pool", runs, took)
		}
		if hits := f.count(t, "SELECT COUNT(*) FROM loanq_work_request WHERE pooled = 1 AND id = ?", r.ID); hits != 1 {
			t.Errorf("the get is not recorded as a pool hit")
		}
		if took >= 1500*time.Millisecond {
			t.Errorf("the get took %s: it waited for a query", took)
		}
		f.audit(t)
	})
}
