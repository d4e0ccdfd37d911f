package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"
)

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
		_, _, err = f.e.Admin().CreateTask(ctx, dispatch.TaskSpec{Name: "bad", Where: "eligible = 1", CreatedBy: "a"})
		cases["task exists"] = err
		_, _, err = f.e.Admin().CreateTask(ctx, dispatch.TaskSpec{Name: "t2", Where: "no_such_column = 1", CreatedBy: "a"})
		cases["criteria bad column"] = err
		_, _, err = f.e.Admin().CreateTask(ctx, dispatch.TaskSpec{Name: "t3", Where: "eligible = = 1", CreatedBy: "a"})
		cases["criteria syntax"] = err
		_, _, err = f.e.Admin().CreateTask(ctx, dispatch.TaskSpec{Name: "t4", Where: "1=1; DROP TABLE loan", CreatedBy: "a"})
		cases["criteria with ;"] = err
		_, _, err = f.e.Admin().CreateTask(ctx, dispatch.TaskSpec{Name: "t5", Source: "loan; DROP TABLE loan", Where: "1=1", CreatedBy: "a"})
		cases["source with SQL"] = err
		_, _, err = f.e.Admin().CreateTask(ctx, dispatch.TaskSpec{Name: "t6", Where: "1=1", Lock: "bogus", CreatedBy: "a"})
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
