package dispatch_test

import (
	"context"
	"testing"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// docs/algorithm.md, "The lease strategy": a holder whose lease expired and
// was taken over while its criteria query ran must not commit assignments; the
// new holder serves every pending request, the old holder's included.
func TestLeaseHolderTakenOverCommitsNothing(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 10)
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "fenced", Lock: drivers.Lease})
		other := f.engine(t)
		took := false
		f.e.SetAfterQuery(func() {
			if took {
				return
			}
			took = true
			// The holder stalled past its lease: it expires, and another
			// node takes the task over and serves what is pending.
			testdb.Exec(t, f.d, f.db, "UPDATE loanq_task SET lease_expires_at = created_at WHERE id = ?", task.ID)
			if r, err := other.Get(ctx, task.Name, "other", 1, dispatch.GetOptions{NoWait: true}); err != nil || r.Status != dispatch.StatusAssigned {
				t.Errorf("takeover: %+v, %v", r, err)
			}
		})
		defer f.e.SetAfterQuery(nil)
		r, err := f.e.Get(ctx, task.Name, "stalled", 2, fast)
		if err != nil || r.Status != dispatch.StatusAssigned || len(r.Loans) != 2 {
			t.Fatalf("the stalled holder's own request: %+v, %v (served by the new holder)", r, err)
		}
		if !took {
			t.Fatal("the takeover never happened")
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_query_run WHERE task_id = ? AND holder = ?", task.ID, f.e.Holder); n != 0 {
			t.Fatalf("the holder whose lease was taken over committed %d criteria-query run(s)", n)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ?", task.ID); n != 3 {
			t.Fatalf("%d work rows, want 3 (2 + 1, all from the new holder)", n)
		}
		f.audit(t)
	})
}
