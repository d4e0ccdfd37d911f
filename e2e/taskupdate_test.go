package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// `task update`: only the options given change, the criteria are checked
// against the database first, bad input changes nothing, active work is kept.
func TestTaskUpdate(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 20)
		mustOK(t, dsn, "admin", "task", "create", "up", "--where", "eligible = 1", "--order", "priority", "--max-hold", "2h")
		held := decode(t, mustOK(t, dsn, "ann", "--output", "json", "work", "get", "up", "--count", "2"))
		before := snapshot(t, e.DB)

		bad := [][]string{
			{"task", "update", "up"}, // nothing to change
			{"task", "update", "no-such-task", "--max-active", "3"},
			{"task", "update", "up", "--where", "no_such_column = 1"},
			{"task", "update", "up", "--order", "no_such_column"},
			{"task", "update", "up", "--where", ""},
			{"task", "update", "up", "--source", "no_such_table"},
			{"task", "update", "up", "--max-active", "-1"},
			{"task", "update", "up", "--lock", "bogus"},
			{"task", "update", "up", "--lease-ttl", "0s"},
			{"task", "update", "up", "--query-delay", "-1s"},
			{"task", "update", "up", "--hold-limit", "1ms"},
			{"task", "update", "up", "--hold-limit", "0s"},
			{"task", "update", "up", "--max-hold", "0s"},
			{"task", "update", "up", "--max-hold", "soon"},
			{"task", "update", "up", "--where", "eligible = 1; DROP TABLE loan"},
		}
		if !drivers.Supports(d, drivers.Rows) {
			bad = append(bad, []string{"task", "update", "up", "--lock", "rows"})
		}
		for _, args := range bad {
			if r := loanq(t, dsn, "admin", args...); r.code != 2 || strings.Contains(r.stderr, "panic") {
				t.Errorf("loanq %v: exit %d, want 2\n%s", args, r.code, r.stderr)
			}
		}
		if after := snapshot(t, e.DB); after != before {
			t.Fatalf("bad input changed the database:\nbefore %s\nafter  %s", before, after)
		}

		r := mustOK(t, dsn, "admin", "--output", "json", "task", "update", "up", "--order", "priority DESC", "--max-active", "3", "--max-hold", "off")
		if !strings.Contains(r.stdout, `"max_hold_ms": null`) || !strings.Contains(r.stdout, `"max_active": 3`) {
			t.Fatalf("task update printed:\n%s", r.stdout)
		}
		task, err := e.Task(context.Background(), "up")
		if err != nil {
			t.Fatal(err)
		}
		if task.Order != "priority DESC" || task.Where != "eligible = 1" || task.MaxActive != 3 || task.MaxHold != 0 {
			t.Fatalf("stored after update: %+v", task)
		}
		if got := pipelineLoans(t, dsn, "ann", "up"); sorted(got) != sorted(held.Loans) {
			t.Fatalf("ann's active work after the update: %v, want %v kept", got, held.Loans)
		}
		// The new order is in force at once; the cap counts the kept work.
		next := decode(t, mustOK(t, dsn, "bob", "--output", "json", "work", "get", "up", "--count", "1"))
		if len(next.Loans) != 1 || next.Loans[0] != 20 {
			t.Fatalf("bob got %v under --order \"priority DESC\" (ann holds %v)", next.Loans, held.Loans)
		}
		more := decode(t, mustOK(t, dsn, "ann", "--output", "json", "work", "get", "up", "--count", "5"))
		if len(more.Loans) != 1 {
			t.Fatalf("ann holds 2 under a new cap of 3 and got %v more", more.Loans)
		}
		mustOK(t, dsn, "admin", "task", "update", "up", "--max-hold", "90m", "--hold-limit", "2m")
		if task, _ = e.Task(context.Background(), "up"); task.MaxHold != 90*time.Minute || task.HoldLimit != 2*time.Minute {
			t.Fatalf("max hold %s, hold limit %s after update", task.MaxHold, task.HoldLimit)
		}
		mustOK(t, dsn, "admin", "task", "update", "up", "--hold-limit", "default")
		if task, _ = e.Task(context.Background(), "up"); task.HoldLimit != 0 || task.MaxHold != 90*time.Minute {
			t.Fatalf("hold limit %s (want the default), max hold %s (want kept)", task.HoldLimit, task.MaxHold)
		}
		audit(t, e)
	})
}
