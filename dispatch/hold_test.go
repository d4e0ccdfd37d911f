package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// The hold limit a lock transaction gets: --hold-limit as given; else 4 x
// the slowest recent criteria query (or the query delay), 30 s to 1 h. With
// nothing measured yet a statement may run up to the 1 h ceiling (its cost
// is unknown), while an idle holder is still ended at the derived limit.
func TestHoldLimitBounds(t *testing.T) {
	testdb.EachPooled(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 1)
		ctx := context.Background()
		check := func(task *dispatch.Task, idle, stmt time.Duration) {
			t.Helper()
			gi, gs, err := f.e.HoldBounds(ctx, task)
			if err != nil || gi != idle || gs != stmt {
				t.Fatalf("task %s: idle %s, statement %s (%v); want %s and %s", task.Name, gi, gs, err, idle, stmt)
			}
		}
		explicit := f.task(t, dispatch.TaskSpec{Name: "explicit", HoldLimit: 90 * time.Second})
		check(explicit, 90*time.Second, 90*time.Second)
		fresh := f.task(t, dispatch.TaskSpec{Name: "fresh"})
		check(fresh, dispatch.DefaultHoldFloor, dispatch.DefaultHoldCeiling)
		delayed := f.task(t, dispatch.TaskSpec{Name: "delayed", QueryDelay: 20 * time.Second})
		check(delayed, 80*time.Second, dispatch.DefaultHoldCeiling)
		// A measured run (the query delay is 0 here): 4 x its time, both bounds.
		if _, err := f.e.Get(ctx, "fresh", "oliver", 1, fast); err != nil {
			t.Fatal(err)
		}
		testdb.Exec(t, f.d, f.db, "UPDATE loanq_query_run SET duration_ms = 20000")
		check(fresh, 80*time.Second, 80*time.Second)
		testdb.Exec(t, f.d, f.db, "UPDATE loanq_query_run SET duration_ms = 1200000")
		check(fresh, dispatch.DefaultHoldCeiling, dispatch.DefaultHoldCeiling)
		testdb.Exec(t, f.d, f.db, "UPDATE loanq_query_run SET duration_ms = 10")
		check(fresh, dispatch.DefaultHoldFloor, dispatch.DefaultHoldFloor)
	})
}
