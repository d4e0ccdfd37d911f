package dispatch_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"
)

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
		if _, err := f.e.Admin().DeleteTask(ctx, "again", false); err != nil {
			t.Fatal(err)
		}
		_, err := f.e.Dispose(ctx, "again", "1", "oliver", dispatch.Complete, 0, false)
		if problem.ExitCode(err) != problem.ExitUsage || !strings.Contains(err.Error(), `unknown task "again"`) {
			t.Fatalf("dispose in a deleted task: %v", err)
		}
		cycle()
		if _, err := f.e.Admin().DeleteTask(ctx, "again", false); err != nil {
			t.Fatal(err)
		}
		// Created again by another engine: this one still knows the old id.
		other := f.engine(t)
		if _, _, err := other.Admin().CreateTask(ctx, dispatch.TaskSpec{Name: "again", Where: "eligible = 1", Order: "priority", CreatedBy: "admin"}); err != nil {
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

// A pipeline's age_ms counts milliseconds by the database clock read with
// the pipeline, not whole seconds × 1000 (docs/json.md).
func TestPipelineAgeInMilliseconds(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 1)
		ctx := context.Background()
		f.task(t, dispatch.TaskSpec{Name: "age"})
		if _, err := f.e.Get(ctx, "age", "oliver", 1, fast); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1300 * time.Millisecond)
		items, err := f.e.Pipeline(ctx, "oliver", "")
		if err != nil || len(items) != 1 {
			t.Fatalf("pipeline: %v %v", items, err)
		}
		it := items[0]
		// Whole seconds × 1000 would give 1000 here, not 1250 or more.
		if d := it.AgeMS - it.AgeSeconds*1000; it.AgeMS < 1250 || it.AgeMS > 60000 || d < 0 || d >= 1000 {
			t.Errorf("after 1.3 s: age_ms %d, age_seconds %d; want the age in milliseconds, within a second of the whole seconds", it.AgeMS, it.AgeSeconds)
		}
	})
}
