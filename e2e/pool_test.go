package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// The candidate pool across OS processes (docs/algorithm.md, "The candidate pool"): loanq processes claim
// from one pool while a `task refill --all --every` process refills it; no
// loan is handed out twice, and a refill killed with SIGKILL mid-run (inside
// its criteria query) writes nothing — the pool stays as it was, nothing is
// pending — and the next refill runs and puts the first eligible loans
// nobody holds back in the criteria order. A claimer killed mid-claim:
// TestPoolClaimerKilled.
func TestPoolAcrossProcesses(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, db := testdb.Migrated(t, dsn)
		testdb.CreateLoans(t, d, db, 120)
		mustOK(t, dsn, "admin", "task", "create", "heavy", "--where", "eligible = 1", "--order", "priority",
			"--query-delay", "300ms", "--prefetch", "30")

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		refill := command(ctx, dsn, "refresher", "task", "refill", "--all", "--every", "1s")
		if err := refill.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = refill.Process.Kill(); _ = refill.Wait() }()

		const procs, gets = 6, 8
		var mu sync.Mutex
		handed := map[int64]string{}
		var wg sync.WaitGroup
		for p := 0; p < procs; p++ {
			wg.Add(1)
			go func(p int) {
				defer wg.Done()
				user := fmt.Sprintf("proc%d", p)
				for i := 0; i < gets; i++ {
					r := loanq(t, dsn, user, "-o", "json", "work", "get", "heavy", "--count", "2")
					if r.code != 0 {
						t.Errorf("%s get %d: exit %d: %s", user, i, r.code, r.stderr)
						return
					}
					req := decode(t, r)
					mu.Lock()
					for _, l := range req.Loans {
						if who, dup := handed[l]; dup {
							t.Errorf("loan %d handed to %s and %s", l, who, user)
						}
						handed[l] = user
					}
					mu.Unlock()
				}
			}(p)
		}
		wg.Wait()
		if len(handed) != procs*gets*2 {
			t.Errorf("%d loans handed out, want %d", len(handed), procs*gets*2)
		}
		hits := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work_request WHERE pooled = 1")
		runs := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_query_run")
		t.Logf("%d of %d gets from the pool, %d criteria runs", hits, procs*gets, runs)
		if hits < procs*gets/2 {
			t.Errorf("only %d of %d gets served from the pool", hits, procs*gets)
		}
		auditClean(t, dsn)

		// A refill killed with SIGKILL during its criteria query.
		_ = refill.Process.Kill()
		_ = refill.Wait()
		mustOK(t, dsn, "admin", "task", "update", "heavy", "--query-delay", "3s")
		id := testdb.Int(t, d, db, "SELECT id FROM loanq_task WHERE name = 'heavy'")
		pooled := poolKeys(t, d, db, id)
		before := int64(len(pooled))
		victim := startProc(t, dsn, "refresher", time.Minute, "task", "refill", "heavy")
		time.Sleep(1500 * time.Millisecond)
		if !victim.running() {
			r := victim.wait()
			t.Fatalf("the refill ended before its SIGKILL, inside its 3 s query: exit %d %s%s", r.code, r.stdout, r.stderr)
		}
		_ = victim.cmd.Process.Signal(syscall.SIGKILL)
		if r := victim.wait(); r.code == 0 {
			t.Fatalf("the refill finished before its SIGKILL: %s", r.stdout)
		}
		// It wrote nothing: the pool is the one before it, in its order, and
		// no request is pending.
		settled(t, d, db)
		if got := poolKeys(t, d, db, id); !slices.Equal(got, pooled) {
			t.Errorf("pool after the killed refill: %v\nwant %v", got, pooled)
		}
		if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work_request WHERE status = 'pending'"); n != 0 {
			t.Errorf("%d requests pending after the killed refill", n)
		}
		// Its transaction dies with its connection: the next refill gets the
		// lock (or the lease, taken over at once on this host) and the pool.
		deadline := time.Now().Add(20 * time.Second)
		for {
			r := loanq(t, dsn, "refresher", "-o", "json", "task", "refill", "heavy")
			if r.code != 0 {
				t.Fatalf("refill after the killed one: exit %d: %s", r.code, r.stderr)
			}
			if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_pool"); n >= before && n > 0 && !strings.Contains(r.stdout, `"skipped"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the pool stayed blocked after a refill was killed: %s", r.stdout)
			}
			time.Sleep(500 * time.Millisecond)
		}
		// The following refill put in the first 30 eligible loans nobody
		// holds, in the criteria order, and none of its rows stays held.
		eligible, err := drivers.ScanKeys(db.Query("SELECT id FROM loan WHERE eligible = 1 ORDER BY priority"))
		if err != nil {
			t.Fatal(err)
		}
		active, err := drivers.ScanKeys(db.Query(testdb.Rebind(d, "SELECT loan_id FROM loanq_work WHERE task_id = ? AND disposition IS NULL"), id))
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, k := range eligible {
			if !slices.Contains(active, k) {
				want = append(want, k)
			}
		}
		want = want[:min(len(want), 30)]
		settled(t, d, db)
		if got := poolKeys(t, d, db, id); !slices.Equal(got, want) {
			t.Errorf("pool after the following refill: %v\nwant %v", got, want)
		}
		got := decode(t, mustOK(t, dsn, "late", "-o", "json", "work", "get", "heavy", "--count", "1"))
		if got.Assigned != 1 || fmt.Sprint(got.Loans[0]) != want[0] {
			t.Errorf("after the killed refill: %+v, want loan %s", got, want[0])
		}
		auditClean(t, dsn)
	})
}

// auditClean runs the engine's audits (no loan active twice, counts match,
// nothing pending) against the final state.
func auditClean(t *testing.T, dsn string) {
	t.Helper()
	d, db := testdb.Open(t, dsn)
	findings, err := newEngine(db, d).Admin().Audit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		if f.Count != 0 {
			t.Errorf("audit %s: %d", f.Check, f.Count)
		}
	}
}

// serve --refill fills an empty pool (no get needed) and keeps it filled.
func TestServeRefill(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, db := testdb.Migrated(t, dsn)
		testdb.CreateLoans(t, d, db, 50)
		mustOK(t, dsn, "admin", "task", "create", "heavy", "--where", "eligible = 1", "--order", "priority", "--prefetch", "20")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		srv := command(ctx, dsn, "refresher", "serve", "--listen", "127.0.0.1:0", "--refill", "--refill-every", "1s")
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = srv.Process.Signal(syscall.SIGTERM); _ = srv.Wait() }()
		deadline := time.Now().Add(20 * time.Second)
		for testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_pool") != 20 {
			if time.Now().After(deadline) {
				t.Fatalf("serve --refill did not fill the pool: %d candidates", testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_pool"))
			}
			time.Sleep(200 * time.Millisecond)
		}
		// Drain it below the low mark (5): refilled again.
		got := decode(t, mustOK(t, dsn, "ana", "-o", "json", "work", "get", "heavy", "--count", "16"))
		if got.Assigned != 16 {
			t.Fatalf("draining get: %+v", got)
		}
		for testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_pool") < 20 {
			if time.Now().After(deadline.Add(10 * time.Second)) {
				t.Fatalf("serve --refill did not refill a pool below its low mark")
			}
			time.Sleep(200 * time.Millisecond)
		}
		auditClean(t, dsn)
	})
}

// Pool rows whose key is no key of the task (docs/security.md: a text key in
// an integer-key task, written by hand into loanq_pool) are dropped by the
// claim that meets them, never handed out and never an error: before, on
// PostgreSQL, binding the claimed keys as bigint failed every `work get` of
// the task, the admin's included, until a refill replaced the pool. The
// bad rows are written by the owner, as a trusted account or an old row
// could be, whatever triggers refuse from processors; first in the pool
// (pos below every refill's), so that every claim meets them.
func TestPoolDropsKeysOfAnotherType(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, db := testdb.Migrated(t, dsn)
		testdb.CreateLoans(t, d, db, 40)
		tasks := []string{"pf"}
		mustOK(t, dsn, "admin", "task", "create", "pf", "--where", "eligible = 1", "--order", "priority", "--prefetch", "10")
		if drivers.Supports(d, drivers.Rows) {
			// The rows strategy locks the claimed keys' source rows first
			// (lockSourceRows), another statement that binds them.
			tasks = append(tasks, "pfrows")
			mustOK(t, dsn, "admin", "task", "create", "pfrows", "--where", "eligible = 1", "--order", "priority", "--prefetch", "10", "--lock", "rows")
		}
		bad := []string{
			"zz'); SELECT pg_sleep(5)--", // the issue's: text in an integer-key task
			"99999999999999999999",       // digits past a 64-bit integer
			"007",                        // not an integer as loanq writes one (nor a JSON number)
			" 12",                        // nor this
		}
		for _, name := range tasks {
			t.Run(name, func(t *testing.T) {
				id := testdb.Int(t, d, db, "SELECT id FROM loanq_task WHERE name = ?", name)
				// The first get runs the criteria query: loan 1 to it, 2..11 pooled.
				if got := decode(t, mustOK(t, dsn, "filler", "-o", "json", "work", "get", name, "--count", "1")); fmt.Sprint(got.Loans) != "[1]" {
					t.Fatalf("filling get: %+v", got)
				}
				plant := func() {
					t.Helper()
					for i, key := range bad {
						testdb.Exec(t, d, db, `INSERT INTO loanq_pool (task_id, loan_id, pos, filled_at)
SELECT task_id, ?, ?, MAX(filled_at) FROM loanq_pool WHERE task_id = ? GROUP BY task_id`, key, -7+i, id)
					}
					if got := poolKeys(t, d, db, id); len(got) < len(bad) || !slices.Equal(got[:len(bad)], bad) {
						t.Fatalf("pool after planting the bad rows: %q", got)
					}
				}
				gone := func(when string) {
					t.Helper()
					for _, key := range poolKeys(t, d, db, id) {
						if slices.Contains(bad, key) {
							t.Errorf("%s: pool row %q is still there", when, key)
						}
					}
				}
				plant()
				// Served from the pool: the good candidates, in order.
				r := loanq(t, dsn, "admin", "-o", "json", "work", "get", name, "--count", "2")
				if r.code != 0 {
					t.Fatalf("work get %s with bad pool rows: exit %d\n%s%s", name, r.code, r.stdout, r.stderr)
				}
				got := decode(t, r)
				if got.Status != dispatch.StatusAssigned || fmt.Sprint(got.Loans) != "[2 3]" {
					t.Errorf("work get %s with bad pool rows: %+v, want loans 2 and 3", name, got)
				}
				if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work_request WHERE id = ? AND pooled = 1", got.RequestID); n != 1 {
					t.Errorf("the get was not served from the pool")
				}
				gone("after a pool claim")
				// A request the pool cannot fill: the claim rolls back, the
				// usual path serves it, and the bad rows go all the same.
				plant()
				r = loanq(t, dsn, "ana", "-o", "json", "work", "get", name, "--count", "15")
				if r.code != 0 {
					t.Fatalf("work get %s --count 15 with bad pool rows: exit %d\n%s%s", name, r.code, r.stdout, r.stderr)
				}
				if got := decode(t, r); got.Status != dispatch.StatusAssigned || got.Assigned != 15 || got.Loans[0] != 4 {
					t.Errorf("work get %s --count 15 with bad pool rows: %+v, want 15 loans from 4 on", name, got)
				}
				gone("after a get the pool could not fill")
				for _, key := range bad {
					if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND loan_id = ?", id, key); n != 0 {
						t.Errorf("bad key %q was handed out", key)
					}
				}
			})
		}
		auditClean(t, dsn)
	})
}
