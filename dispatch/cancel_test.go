package dispatch_test

import (
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/loankey"

	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"
)

// A request cancelled while a holder runs its criteria query is not served
// by that holder (it reads and finishes only pending requests), and a cancel
// that races with a holder's commit loses to it: the database decides, and
// the requester is told the request was served.
func TestCancelRacesWithHolder(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 40)
		ctx := context.Background()
		for _, s := range f.d.Capabilities().Strategies {
			t.Run(string(s), func(t *testing.T) {
				task := f.task(t, dispatch.TaskSpec{Name: "race-" + string(s), Lock: s})
				// Cancelled after the holder's criteria query: never served.
				id, err := f.d.Statements().RequestInsert.InsertID(ctx, f.db, engineio.RequestInsertParams{TaskID: task.ID, User: "waiter", Requested: 2})
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
				id2, err := f.d.Statements().RequestInsert.InsertID(ctx, f.db, engineio.RequestInsertParams{TaskID: task.ID, User: "late", Requested: 1})
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

// A request cancelled after the holder read it for assignment, before the
// holder finished it: its loan goes to the next request, the cancelled one
// gets nothing, and no request is answered empty while a loan was there for
// it (where the round's requests are finished in one statement the round is
// rolled back and run again; otherwise the cancelled one is skipped).
func TestCancelBetweenReadAndFinish(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		// Two loans: each task below sees both (work is per task), one for
		// each of its requests not cancelled.
		f := setup(t, dsn, 2)
		ctx := context.Background()
		if f.d.Name() == "sqlite" {
			t.Skip("SQLite has one writer at a time: a cancel cannot commit while the holder's assignment transaction is open")
		}
		for _, s := range f.d.Capabilities().Strategies {
			if s == drivers.Rows {
				continue // each caller serves its own request only
			}
			t.Run(string(s), func(t *testing.T) {
				task := f.task(t, dispatch.TaskSpec{Name: "between-" + string(s), Lock: s})
				ins := func(user string) int64 {
					id, err := f.d.Statements().RequestInsert.InsertID(ctx, f.db, engineio.RequestInsertParams{TaskID: task.ID, User: user, Requested: 1})
					if err != nil {
						t.Fatal(err)
					}
					return id
				}
				b, c := ins("b"), ins("c")
				holder := f.engine(t)
				holder.SetAfterPending(func() {
					holder.SetAfterPending(nil)
					if req, err := f.e.Cancel(ctx, b, "b"); err != nil || req.Status != dispatch.StatusCancelled {
						t.Errorf("cancel between read and finish: %+v, %v", req, err)
					}
				})
				h, err := holder.Get(ctx, task.Name, "h", 1, fast)
				if err != nil || h.Status != dispatch.StatusAssigned || len(h.Loans) != 1 {
					t.Fatalf("holder: %+v, %v; want its own request assigned the loan b gave up", h, err)
				}
				for id, want := range map[int64]string{b: dispatch.StatusCancelled, c: dispatch.StatusAssigned} {
					r, err := f.e.Request(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					if r.Status != want || (want == dispatch.StatusCancelled) != (len(r.Loans) == 0) {
						t.Fatalf("request of %s: %s %v; want %s", r.User, r.Status, r.Loans, want)
					}
				}
				f.audit(t)
			})
		}
	})
}

// A user has at most one pending request per task: asking while one is
// pending attaches to it (same id, its count stands, OnAttach is told), a
// caller that must not share an answer (OwnRequest) never serves it and logs
// its own once it is answered or expired (TestOwnRequestLeavesTheOtherRequestAlone
// waits for one answered), and once nothing is pending a new request is logged. Of many
// concurrent calls of one user, every answer is a served request, and no
// request of the user stays pending.
func TestAttachToPendingRequest(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 200)
		ctx := context.Background()
		for _, s := range f.d.Capabilities().Strategies {
			t.Run(string(s), func(t *testing.T) {
				task := f.task(t, dispatch.TaskSpec{Name: "attach-" + string(s), Lock: s})
				first, err := f.d.Statements().RequestInsert.InsertID(ctx, f.db, engineio.RequestInsertParams{TaskID: task.ID, User: "ann", Requested: 2})
				if err != nil {
					t.Fatal(err)
				}
				var told int64
				opt := fast
				opt.OnAttach = func(id int64) { told = id }
				r, err := f.e.Get(ctx, task.Name, "ann", 1, opt)
				if err != nil || r.ID != first || !r.Attached || told != first || r.Requested != 2 || len(r.Loans) != 2 || r.Status != dispatch.StatusAssigned {
					t.Fatalf("get with request %d pending: told %d, %+v, %v; want it attached and served with 2 loans", first, told, r, err)
				}
				r, err = f.e.Get(ctx, task.Name, "ann", 1, fast)
				if err != nil || r.ID == first || r.Attached || len(r.Loans) != 1 {
					t.Fatalf("get with nothing pending: %+v, %v; want a new request", r, err)
				}

				// OwnRequest: the pending one, whose caller is gone, is left
				// to expire, unserved; then the caller's own is logged.
				pending, err := f.d.Statements().RequestInsert.InsertID(ctx, f.db, engineio.RequestInsertParams{TaskID: task.ID, User: "ann", Requested: 1})
				if err != nil {
					t.Fatal(err)
				}
				if err := testdb.AgeRequest(f.d, f.db, pending, drivers.RequestAlive+time.Second); err != nil {
					t.Fatal(err)
				}
				own := fast
				own.OwnRequest = true
				r, err = f.e.Get(ctx, task.Name, "ann", 3, own)
				if err != nil || r.ID == pending || r.Attached || r.Requested != 3 || len(r.Loans) != 3 {
					t.Fatalf("own request with %d pending: %+v, %v", pending, r, err)
				}
				if req, err := f.e.Request(ctx, pending); err != nil || req.Status != dispatch.StatusExpired || len(req.Loans) != 0 {
					t.Fatalf("the abandoned request a caller with its own request found: %+v, %v; want it expired, unserved", req, err)
				}

				// Concurrent calls of one user.
				const calls = 8
				answers := make([]*dispatch.Request, calls)
				var wg sync.WaitGroup
				for i := range answers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r, err := f.engine(t).Get(ctx, task.Name, "bob", 1, fast)
						if err != nil {
							t.Errorf("concurrent get %d: %v", i, err)
							return
						}
						answers[i] = r
					}()
				}
				wg.Wait()
				loans := map[int64][]loankey.Key{}
				for _, r := range answers {
					if r == nil {
						continue
					}
					if r.Status != dispatch.StatusAssigned || len(r.Loans) != 1 {
						t.Errorf("concurrent get answered %+v", r)
					}
					if l, seen := loans[r.ID]; seen && fmt.Sprint(l) != fmt.Sprint(r.Loans) {
						t.Errorf("two answers of request %d differ: %v and %v", r.ID, l, r.Loans)
					}
					loans[r.ID] = r.Loans
				}
				if n := f.count(t, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ? AND status = 'pending'", task.ID); n != 0 {
					t.Errorf("%d requests left pending", n)
				}
				f.audit(t)
			})
		}
	})
}

// A request id that cannot exist (0, negative) or does not is bad input for
// every reader of a request, and no statement changes anything.
func TestRequestIDIsChecked(t *testing.T) {
	f := setup(t, testdb.Fresh(t, "sqlite"), 5)
	ctx := context.Background()
	for _, id := range []int64{0, -3, 999} {
		if _, err := f.e.Request(ctx, id); problem.KindOf(err) != problem.Usage {
			t.Errorf("Request(%d): %v, want bad input", id, err)
		}
		if _, err := f.e.Status(ctx, id, false, fast); problem.KindOf(err) != problem.Usage {
			t.Errorf("Status(%d): %v, want bad input", id, err)
		}
		if _, err := f.e.Cancel(ctx, id, "ana"); problem.KindOf(err) != problem.Usage {
			t.Errorf("Cancel(%d): %v, want bad input", id, err)
		}
	}
	if n := testdb.Int(t, f.d, f.db, "SELECT COUNT(*) FROM loanq_work_request"); n != 0 {
		t.Fatalf("%d requests after bad ids, want 0", n)
	}
}
