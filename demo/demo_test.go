package demo_test

import (
	"context"
	"testing"
	"time"

	"github.com/loanq/loanq/demo"
	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"
)

// TestRunSmall runs the demo small on every database and checks its summary
// against the database. Nothing depends on timing: how many requests are made
// varies with the machine; only the relations between the counts are checked.
func TestRunSmall(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s, err := demo.Run(ctx, demo.Config{DSN: dsn, Loans: 200, Seed: 1, Processors: 3, Duration: 2 * time.Second,
			QueryDelay: 200 * time.Millisecond})
		if err != nil {
			t.Fatalf("demo: %v", err)
		}
		if s.Invariant != "PASS" || !s.AuditClean || len(s.Errors) > 0 || !s.Passed {
			t.Fatalf("demo did not pass: invariant %s, audit %+v, errors %v", s.Invariant, s.Audit, s.Errors)
		}
		if s.Requests == 0 || s.LoansAssigned == 0 {
			t.Fatalf("nothing happened: %d requests, %d loans assigned", s.Requests, s.LoansAssigned)
		}
		if s.AuditsDuringRun == 0 {
			t.Errorf("no audit ran during the run")
		}
		var requests, loans, disposed int64
		for _, p := range s.ByProcessor {
			requests += p.Requests
			loans += p.LoansAssigned
			disposed += p.Complete + p.Return + p.Never + p.Active
		}
		if len(s.ByProcessor) != 3 {
			t.Errorf("%d processors in the summary, want 3", len(s.ByProcessor))
		}
		// Per-processor loans come from loanq_work, the total from loanq_query_run.
		if loans != s.LoansAssigned || disposed != loans {
			t.Errorf("loans per processor sum to %d (by disposition %d); query runs assigned %d", loans, disposed, s.LoansAssigned)
		}
		if requests != s.Requests {
			t.Errorf("requests per processor sum to %d, want %d", requests, s.Requests)
		}
		// Every request was served by some run; a run may serve several.
		if s.RequestsServed != s.Requests || s.QueryRuns > s.RequestsServed || s.QueryRuns == 0 {
			t.Errorf("%d query runs served %d requests of %d", s.QueryRuns, s.RequestsServed, s.Requests)
		}
		if s.RequestsByStatus[dispatch.StatusPending] != 0 {
			t.Errorf("%d requests left pending", s.RequestsByStatus[dispatch.StatusPending])
		}

		// The database's own verdict, on a connection of its own.
		d, db := testdb.Open(t, dsn)
		findings, err := dispatch.New(db, d).Admin().Audit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range findings {
			if f.Count != 0 {
				t.Errorf("audit %s = %d (%s)", f.Check, f.Count, f.Purpose)
			}
		}
		// A completed loan was updated first, so it no longer matches its task.
		if n := testdb.Int(t, d, db, `SELECT COUNT(*) FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
JOIN loan l ON `+d.Dialect().KeyAsText("l.id")+` = w.loan_id
WHERE t.name = 'verify-bank' AND w.disposition = 'complete' AND l.statements_verified = 0`); n != 0 {
			t.Errorf("%d completed verify-bank loans still match the criteria", n)
		}
	})
}

// TestSeedResetsOnlyItsOwn checks that reseeding is deterministic and
// announced, and that the demo refuses to touch what it did not create.
func TestSeedResetsOnlyItsOwn(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		cfg := demo.Config{DSN: dsn, Loans: 150, Seed: 7}
		s1, err := demo.Seed(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if s1.Reset || !s1.Migrated || len(s1.Tasks) != 3 {
			t.Fatalf("first seed: reset %v, migrated %v, %d tasks", s1.Reset, s1.Migrated, len(s1.Tasks))
		}
		d, db := testdb.Open(t, dsn)
		sum1 := testdb.Int(t, d, db, "SELECT SUM(amount) + SUM(priority) + SUM(statements_verified) FROM loan")

		// Someone else's task over the demo's table survives a reset.
		eng := dispatch.New(db, d)
		if _, _, err := eng.Admin().CreateTask(ctx, dispatch.TaskSpec{Name: "mine", Where: "amount > 0", CreatedBy: "oliver"}); err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Get(ctx, "verify-bank", "oliver", 2, dispatch.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		s2, err := demo.Seed(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !s2.Reset || s2.ResetNote == "" {
			t.Errorf("second seed did not say it reset: %+v", s2)
		}
		if sum2 := testdb.Int(t, d, db, "SELECT SUM(amount) + SUM(priority) + SUM(statements_verified) FROM loan"); sum2 != sum1 {
			t.Errorf("reseeding with the same seed changed the data: %d then %d", sum1, sum2)
		}
		if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_task WHERE name = 'mine'"); n != 1 {
			t.Errorf("the reset deleted a task that is not the demo's")
		}
		if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work"); n != 0 {
			t.Errorf("%d work rows of the old demo tasks survived the reset", n)
		}

		// A demo task name held by someone else: refuse, change nothing.
		testdb.Exec(t, d, db, "UPDATE loanq_task SET created_by = 'oliver' WHERE name = 'big-loans'")
		_, err = demo.Seed(ctx, cfg)
		if problem.KindOf(err) != problem.Usage {
			t.Fatalf("seed over someone else's big-loans: %v, want a usage error", err)
		}
		if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_task"); n != 4 {
			t.Errorf("a refused seed changed the tasks: %d left, want 4", n)
		}
	})
}

// TestSeedRefusesForeignLoanTable: a `loan` table that is not the demo's is never dropped.
func TestSeedRefusesForeignLoanTable(t *testing.T) {
	dsn := testdb.Fresh(t, "sqlite")
	d, db := testdb.Migrated(t, dsn)
	testdb.CreateLoans(t, d, db, 5)
	_, err := demo.Seed(context.Background(), demo.Config{DSN: dsn, Loans: 100})
	if problem.KindOf(err) != problem.Usage {
		t.Fatalf("seed over a foreign loan table: %v, want a usage error", err)
	}
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loan"); n != 5 {
		t.Errorf("the foreign loan table has %d rows, want 5", n)
	}
}
