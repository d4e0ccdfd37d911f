package dispatch_test

import (
	"context"
	"testing"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"
)

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
		if _, err := f.e.Admin().DeleteTask(ctx, "doomed", false); problem.KindOf(err) != problem.Usage {
			t.Fatalf("delete with active work: %v, want bad input", err)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ?", doomed.ID); n != 2 {
			t.Fatalf("a refused delete changed the task's work: %d rows", n)
		}
		work, err := f.e.Admin().DeleteTask(ctx, "doomed", true)
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
		if _, err := f.e.Admin().DeleteTask(ctx, "doomed", true); problem.KindOf(err) != problem.Usage {
			t.Fatalf("deleting an unknown task: %v, want bad input", err)
		}
		f.audit(t)
	})
}
