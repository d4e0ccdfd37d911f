package dispatch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// The backlog is the number of loans a get could be served now: the rows
// the criteria match, minus those active in the task, dispositioned never, or
// returned until a time still ahead; work in another task does not count.
// Each figure is checked against the state built, and the last one against
// what a get then actually hands out.
func TestBacklogCountsEligibleLoans(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 20)
		ctx := context.Background()
		testdb.Exec(t, f.d, f.db, "UPDATE loan SET eligible = 0 WHERE id IN (19, 20)") // do not match
		task := f.task(t, dispatch.TaskSpec{Name: "bl"})
		f.task(t, dispatch.TaskSpec{Name: "other"})
		want := func(n int64, why string) {
			t.Helper()
			b, err := f.e.Admin().CountBacklog(ctx, task)
			if err != nil {
				t.Fatalf("%s: %v", why, err)
			}
			if b.Loans != n {
				t.Fatalf("%s: backlog %d, want %d", why, b.Loans, n)
			}
			if b.CountedAt.IsZero() || b.DurationMS < 0 || b.AgeS != 0 {
				t.Fatalf("%s: counted_at %v, duration %dms, age %ds", why, b.CountedAt, b.DurationMS, b.AgeS)
			}
		}
		want(18, "fresh task, 18 of 20 loans match")
		if r, err := f.e.Get(ctx, "bl", "oliver", 5, fast); err != nil || len(r.Loans) != 5 {
			t.Fatalf("get 5: %v %v", r, err)
		}
		want(13, "5 assigned")
		dispose := func(loan string, action string, after time.Duration) {
			t.Helper()
			if _, err := f.e.Dispose(ctx, "bl", loan, "oliver", action, after, action == "return"); err != nil {
				t.Fatalf("dispose %s %s: %v", loan, action, err)
			}
		}
		dispose("1", "never", 0)
		want(13, "loan 1 dispositioned never")
		dispose("2", "return", 2*time.Hour)
		want(13, "loan 2 returned until 2 h from now")
		dispose("3", "complete", 0)
		want(14, "loan 3 complete and still matching")
		if r, err := f.e.Get(ctx, "other", "tracy", 6, fast); err != nil || len(r.Loans) != 6 {
			t.Fatalf("get 6 in another task: %v %v", r, err)
		}
		want(14, "work in another task")
		// Loan 2's return time passes (moved back, as in TestDispositions).
		testdb.Exec(t, f.d, f.db, "UPDATE loanq_work SET return_at = assigned_at WHERE loan_id = '2'")
		want(15, "loan 2's return time passed")
		// The figure is what a get can hand out: 4 and 5 are oliver's still.
		r, err := f.e.Get(ctx, "bl", "tracy", 100, fast)
		if err != nil || len(r.Loans) != 15 {
			t.Fatalf("get 100 after a backlog of 15: %d loans (%v)", len(r.Loans), err)
		}
		want(0, "every waiting loan assigned")
		f.audit(t)
	})
}

// task stats counts every task's backlog; a task whose count fails (its
// source gone, or not readable by the account) has no figure and says why,
// and the others keep theirs.
func TestAddBacklogsKeepsGoingPastAFailure(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 7)
		ctx := context.Background()
		f.task(t, dispatch.TaskSpec{Name: "a"})
		testdb.Exec(t, f.d, f.db, "CREATE TABLE gone_loans (id INTEGER PRIMARY KEY, eligible INTEGER NOT NULL)")
		f.task(t, dispatch.TaskSpec{Name: "b", Source: "gone_loans", Order: "id"})
		testdb.Exec(t, f.d, f.db, "DROP TABLE gone_loans")
		f.task(t, dispatch.TaskSpec{Name: "c"})
		stats, err := f.e.Admin().Stats(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := f.e.Admin().AddBacklogs(ctx, stats); err != nil {
			t.Fatal(err)
		}
		for _, s := range stats {
			switch {
			case s.Task == "b" && (s.Backlog != nil || !strings.Contains(s.BacklogError, "counting the backlog of task b")):
				t.Errorf("b: backlog %v, error %q", s.Backlog, s.BacklogError)
			case s.Task != "b" && (s.Backlog == nil || s.Backlog.Loans != 7 || s.BacklogError != ""):
				t.Errorf("%s: backlog %+v, error %q; want 7 loans", s.Task, s.Backlog, s.BacklogError)
			}
		}
	})
}
