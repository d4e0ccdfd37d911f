package dispatch_test

import (
	"context"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// Issue 33's interleaving, made deterministic: while a round of a prefetch
// task runs its criteria query, a pool claim assigns loans the query's
// snapshot still lists, and its processor disposes of them (never; made
// ineligible and completed; returned for an hour) before the round assigns.
// The round must hand none of them out again: it rechecks what it assigns,
// by key, as of now (docs/algorithm.md, "What a round may hand out").
// Before the recheck the round gave bob loans 2, 3 and 4 a second time.
func TestRoundHandsOutNothingClaimedAndDisposedMeanwhile(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 40)
		ctx := context.Background()
		f.task(t, dispatch.TaskSpec{Name: "heavy", Prefetch: 5})
		if r, err := f.e.Get(ctx, "heavy", "ana", 1, fast); err != nil || fmt.Sprint(r.Loans) != "[1]" {
			t.Fatalf("first get: %+v, %v; want loan 1 (and loans 2..6 pooled)", r, err)
		}
		other := f.engine(t) // carl works on another node
		var claimed []loankey.Key
		var hookErr error
		f.e.SetAfterQuery(func() {
			f.e.SetAfterQuery(nil) // once: the round's first query
			r, err := other.Get(ctx, "heavy", "carl", 3, fast)
			if err != nil || fmt.Sprint(r.Loans) != "[2 3 4]" {
				hookErr = fmt.Errorf("carl's pool claim during the round's query: %+v, %v; want loans 2, 3, 4 from the pool", r, err)
				return
			}
			claimed = r.Loans
			testdb.Exec(t, f.d, f.db, "UPDATE loan SET eligible = 0 WHERE id = 3") // the work on 3 makes it stop matching
			for _, d := range []struct {
				loan, action string
				after        time.Duration
			}{{"2", "never", 0}, {"3", "complete", 0}, {"4", "return", time.Hour}} {
				if _, err := other.Dispose(ctx, "heavy", d.loan, "carl", d.action, d.after, d.action == "return"); err != nil {
					hookErr = fmt.Errorf("carl's %s of loan %s: %w", d.action, d.loan, err)
					return
				}
			}
		})
		defer f.e.SetAfterQuery(nil)
		// 10 is more than the pool holds: bob's get goes to a round.
		r, err := f.e.Get(ctx, "heavy", "bob", 10, fast)
		if hookErr != nil {
			t.Fatal(hookErr)
		}
		if claimed == nil {
			t.Fatal("the round's query never ran: bob was served without a round")
		}
		if err != nil || r.Status != dispatch.StatusAssigned || fmt.Sprint(r.Loans) != "[5 6 7 8 9 10 11 12 13 14]" {
			t.Fatalf("bob's get: %+v, %v; want loans 5..14: 2 (never), 3 (no longer matching) and 4 (returned for an hour) were claimed and disposed of while the round's query ran", r, err)
		}
		for _, loan := range []int{2, 3, 4} {
			if n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE loan_id = ?", fmt.Sprint(loan)); n != 1 {
				t.Errorf("loan %d has %d work rows, want 1 (carl's)", loan, n)
			}
		}
		f.audit(t)
	})
}
