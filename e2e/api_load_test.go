package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/loanq/loanq/internal/testkit/apiload"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// TestAPILoadShort is the CI version of scripts/api-load (BENCHMARKS.md):
// 200 API clients at once for 8 s against one `loanq serve --api` process
// with a bounded pool (--max-conns 16), each asking for a loan, long-polling
// while pending and completing it. Every answer is 200 or 202, nothing is
// left pending, no loan is active twice, and afterwards the process's
// goroutines are back near where they were before the load.
func TestAPILoadShort(t *testing.T) {
	// No t.Parallel: it loads the machine with 200 clients and asserts a throughput (and the goroutines settling); beside other tests it would stretch them and be stretched.
	// Not SQLite: one writer at a time; BENCHMARKS.md (API load) says
	// what many API clients do to one SQLite file.
	for _, dialect := range []string{"postgres", "mysql"} {
		t.Run(dialect, func(t *testing.T) {
			// The two dialects at once: each has its own server, database
			// and serve process, and what is asserted has room for sharing
			// the machine (alone, each completes 1,000 loans or more in
			// the 8 s; 200 are asked for).
			t.Parallel()
			const clients = 200
			dsn := testdb.Fresh(t, dialect)
			d, db := testdb.Migrated(t, dsn)
			testdb.CreateLoans(t, d, db, 30000)
			lock := "skip"
			if dialect == "sqlite" {
				lock = "lease"
			}
			mustOK(t, dsn, "admin", "task", "create", "load", "--where", "eligible = 1", "--order", "priority", "--lock", lock)
			e := newEngine(db, d)
			tokens := make([]string, clients)
			for i := range tokens {
				tok, err := e.Admin().CreateToken(context.Background(), fmt.Sprintf("load%03d", i), "processor", "admin", 0)
				if err != nil {
					t.Fatal(err)
				}
				tokens[i] = tok.Token
			}
			node := startServe(t, dsn, "--api", "--max-conns", "16")
			ctx := context.Background()
			before, err := apiload.Scrape(ctx, node.url, "")
			if err != nil {
				t.Fatal(err)
			}
			r, err := apiload.Run(ctx, apiload.Options{URL: node.url, Task: "load", Tokens: tokens, Duration: 8 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			after, err := apiload.Settle(ctx, node.url, "", before.Goroutines, 16+10, 20*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d clients, %.1f s: %d calls (%.0f/s), %d loans completed (%.0f/s), p50 %.1f ms, p99 %.1f ms, statuses %v; goroutines %d → %d, heap %.1f → %.1f MiB, pool %d conns",
				dialect, r.Clients, r.ElapsedS, r.Calls, r.CallsPerSec, r.Loans, r.LoansPerSec, r.P50ms, r.P99ms, r.Status,
				before.Goroutines, after.Goroutines, before.HeapInuse/(1<<20), after.HeapInuse/(1<<20), after.ConnsOpen)
			if r.Errors != 0 {
				log := node.stderr.String()
				if len(log) > 3000 {
					log = log[:3000]
				}
				t.Logf("serve's log:\n%s", log)
				t.Errorf("%d errors (answers other than 200/202, or failed calls): %v; statuses %v", r.Errors, r.Samples, r.Status)
			}
			for code := range r.Status {
				if code != 200 && code != 202 {
					t.Errorf("answer %d seen %d times", code, r.Status[code])
				}
			}
			if r.Loans < clients {
				t.Errorf("only %d loans completed by %d clients in 8 s", r.Loans, clients)
			}
			// The pool's connections may stay open (a minute idle; bounded by
			// --max-conns; MySQL's driver keeps a goroutine for each).
			if after.Goroutines > before.Goroutines+16+10 {
				t.Errorf("goroutines %d before the load, %d after it settled: something is left behind", before.Goroutines, after.Goroutines)
			}
			if after.ConnsOpen > 16 {
				t.Errorf("%d database connections open with --max-conns 16", after.ConnsOpen)
			}
			if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work_request WHERE status = 'pending'"); n != 0 {
				t.Errorf("%d requests left pending", n)
			}
			if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE disposition = 'complete'"); n != r.Loans {
				t.Errorf("%d loans complete in the database, the clients completed %d", n, r.Loans)
			}
			findings, err := e.Admin().Audit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range findings {
				if x.Count != 0 {
					t.Errorf("audit %s: %d (%s)", x.Check, x.Count, x.Purpose)
				}
			}
		})
	}
}
