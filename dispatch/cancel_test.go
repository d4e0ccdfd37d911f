package dispatch_test

import (
	"context"
	"strings"
	"testing"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testdb"
)

// A request cancelled while a holder runs its criteria query is not served
// by that holder (it reads and finishes only pending requests), and a cancel
// that races with a holder's commit loses to it: the database decides, and
// the requester is told the request was served.
func TestCancelRacesWithHolder(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 40)
		ctx := context.Background()
		for _, s := range f.d.Strategies() {
			t.Run(string(s), func(t *testing.T) {
				task := f.task(t, dispatch.TaskSpec{Name: "race-" + string(s), Lock: s})
				// Cancelled after the holder's criteria query: never served.
				id, err := f.d.InsertReturningID(ctx, f.db, f.d.Statements().RequestInsert, task.ID, "waiter", 2)
				if err != nil {
					t.Fatal(err)
				}
				holder := f.engine(t)
				holder.SetAfterQuery(func() {
					if req, err := f.e.Cancel(ctx, id, "waiter"); err != nil || req.Status != dispatch.StatusCancelled {
						t.Errorf("cancel during the criteria query: %+v, %v", req, err)
					}
				})
				r, err := holder.Get(ctx, task.Name, "holder", 1, fast)
				if err != nil || r.Status != dispatch.StatusAssigned {
					t.Fatalf("holder: %+v, %v", r, err)
				}
				req, err := f.e.Request(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if req.Status != dispatch.StatusCancelled || len(req.Loans) != 0 {
					t.Fatalf("the request cancelled during the query: %+v", req)
				}

				// Cancelled while the holder's assignment is about to commit:
				// the cancel waits for it and finds the request served.
				id2, err := f.d.InsertReturningID(ctx, f.db, f.d.Statements().RequestInsert, task.ID, "late", 1)
				if err != nil {
					t.Fatal(err)
				}
				holder.SetAfterQuery(nil)
				type answer struct {
					req *dispatch.Request
					err error
				}
				got := make(chan answer, 1)
				holder.SetBeforeCommit(func() {
					holder.SetBeforeCommit(nil)
					go func() {
						req, err := f.engine(t).Cancel(ctx, id2, "late")
						got <- answer{req, err}
					}()
				})
				if _, err := holder.Get(ctx, task.Name, "holder2", 1, fast); err != nil {
					t.Fatal(err)
				}
				a := <-got
				if s == "rows" {
					// rows serves each caller's own request only: "late"
					// stayed pending and the cancel took it.
					if a.err != nil || a.req.Status != dispatch.StatusCancelled {
						t.Fatalf("cancel (rows): %+v, %v", a.req, a.err)
					}
				} else {
					if a.err != nil || a.req.Status != dispatch.StatusAssigned || len(a.req.Loans) != 1 ||
						!strings.Contains(a.req.Notice, "served before it could be cancelled") {
						t.Fatalf("cancel racing with the commit: %+v, %v", a.req, a.err)
					}
				}
				f.audit(t)
			})
		}
	})
}
