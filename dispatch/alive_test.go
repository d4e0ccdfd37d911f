package dispatch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"
)

// Abandoned requests (docs/algorithm.md): tests stand for a caller that was
// silent for a while by moving its request's last sign of life back
// (testdb.AgeRequest), against the database clock.

// logged inserts a pending request of user the way Get logs one, and
// returns its id; nobody waits for it.
func (f *fixture) logged(t *testing.T, task *dispatch.Task, user string, n int) int64 {
	t.Helper()
	id, err := f.d.Statements().RequestInsert.InsertID(context.Background(), f.db, engineio.RequestInsertParams{TaskID: task.ID, User: user, Requested: n})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (f *fixture) age(t *testing.T, id int64, ago time.Duration) {
	t.Helper()
	if err := testdb.AgeRequest(f.d, f.db, id, ago); err != nil {
		t.Fatal(err)
	}
}

// aliveAge is how long ago request id last showed a sign of life, in whole
// seconds of the database clock.
func (f *fixture) aliveAge(t *testing.T, id int64) int64 {
	t.Helper()
	return f.count(t, "SELECT "+f.d.Dialect().SecondsSince("alive_at")+" FROM loanq_work_request WHERE id = ?", id)
}

// holdLease takes the task's lease as a holder elsewhere would (another
// host: nobody takes it over) and returns its release.
func (f *fixture) holdLease(t *testing.T, task *dispatch.Task) func() {
	t.Helper()
	ctx := context.Background()
	st := f.d.Statements()
	const owner = "elsewhere.example:1"
	if _, err := st.LeaseAcquire.Exec(ctx, f.db, engineio.LeaseTakeParams{TaskID: task.ID, Owner: owner, TTLMS: time.Hour.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	lease, err := st.LeaseToken.One(ctx, f.db, engineio.LeaseOwnerParams{TaskID: task.ID, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := st.LeaseRelease.Exec(ctx, f.db, engineio.LeaseFenceParams{TaskID: task.ID, Owner: owner, Token: lease.Token}); err != nil {
			t.Fatal(err)
		}
	}
}

// wantUnserved fails unless request id ended with status and no loans.
func (f *fixture) wantUnserved(t *testing.T, id int64, status string) {
	t.Helper()
	r, err := f.e.Request(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != status || len(r.Loans) != 0 || r.Assigned != 0 {
		t.Errorf("request %d of %s: %s with loans %v; want %s and none", id, r.User, r.Status, r.Loans, status)
	}
	if n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE request_id = ?", id); n != 0 {
		t.Errorf("request %d has %d work rows", id, n)
	}
}

// A pending request without a sign of life for longer than the bound is
// never served, by any strategy's round: it reads as expired, the round
// serves the others (one silent for less than the bound included), and its
// user's next request ends it as expired and is logged anew.
func TestAbandonedRequestIsNeverServed(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 100)
		ctx := context.Background()
		for _, s := range f.d.Capabilities().Strategies {
			t.Run(string(s), func(t *testing.T) {
				task := f.task(t, dispatch.TaskSpec{Name: "abandoned-" + string(s), Lock: s})
				gone := f.logged(t, task, "gone", 2)
				f.age(t, gone, drivers.RequestAlive+time.Second)
				quiet := f.logged(t, task, "quiet", 1)
				f.age(t, quiet, drivers.RequestAlive-10*time.Second)

				if r, err := f.e.Request(ctx, gone); err != nil || r.Status != dispatch.StatusExpired {
					t.Fatalf("a request silent past the bound reads %+v, %v; want expired", r, err)
				}
				r, err := f.e.Get(ctx, task.Name, "ann", 1, fast)
				if err != nil || len(r.Loans) != 1 {
					t.Fatalf("ann: %+v, %v", r, err)
				}
				f.wantUnserved(t, gone, dispatch.StatusExpired)
				if s != drivers.Rows { // rows serves each request by its own caller only
					if r, err := f.e.Request(ctx, quiet); err != nil || r.Status != dispatch.StatusAssigned {
						t.Errorf("a request silent for less than the bound: %+v, %v; want it served by ann's round", r, err)
					}
				}
				// work status of it: expired, not served, and ended so.
				if r, err := f.e.Status(ctx, gone, true, fast); err != nil || r.Status != dispatch.StatusExpired {
					t.Fatalf("status of the abandoned request: %+v, %v", r, err)
				}
				if n := f.count(t, "SELECT COUNT(*) FROM loanq_work_request WHERE id = ? AND status = 'expired'", gone); n != 1 {
					t.Errorf("the abandoned request is not ended as expired in the table")
				}

				// Its user asks again: a new request, not the old one.
				again := f.logged(t, task, "again", 1)
				f.age(t, again, drivers.RequestAlive+time.Second)
				r, err = f.e.Get(ctx, task.Name, "again", 2, fast)
				if err != nil || r.ID == again || r.Attached || len(r.Loans) != 2 {
					t.Fatalf("the user of an abandoned request asking again: %+v, %v; want a new request served", r, err)
				}
				f.wantUnserved(t, again, dispatch.StatusExpired)
				if s == drivers.Rows {
					if _, err := f.e.Status(ctx, quiet, true, fast); err != nil {
						t.Fatal(err)
					}
				}
				f.audit(t)
			})
		}
	})
}

// A request a round read as pending and alive, that expires before the
// round finishes it, is not served: the finish checks the bound too, in the
// database (RequestFinish, RequestFinishMany), and its loans go to the next
// request.
func TestRequestExpiredAfterTheRoundsRead(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 100)
		ctx := context.Background()
		for _, s := range f.d.Capabilities().Strategies {
			if s == drivers.Rows {
				continue // no round: each caller serves its own request
			}
			t.Run(string(s), func(t *testing.T) {
				task := f.task(t, dispatch.TaskSpec{Name: "late-" + string(s), Lock: s})
				// Alive when the round reads it, past the bound when it
				// finishes: the hook holds the round between the two (no
				// write there: SQLite's round holds the write lock).
				late := f.logged(t, task, "late", 2)
				f.age(t, late, drivers.RequestAlive-2*time.Second)
				e := f.engine(t)
				var once sync.Once
				readAlive := false
				e.SetAfterPending(func() {
					once.Do(func() {
						r, err := f.e.Request(ctx, late)
						readAlive = err == nil && r.Status == dispatch.StatusPending
						time.Sleep(2500 * time.Millisecond)
					})
				})
				r, err := e.Get(ctx, task.Name, "ann", 3, fast)
				if err != nil || len(r.Loans) != 3 || r.Status != dispatch.StatusAssigned {
					t.Fatalf("ann: %+v, %v; want 3 loans", r, err)
				}
				if !readAlive {
					t.Errorf("the round read the request when it was already past the bound: the test did not place it in the window")
				}
				f.wantUnserved(t, late, dispatch.StatusExpired)
				e.SetAfterPending(nil)
				if _, err := e.Status(ctx, late, false, fast); err != nil {
					t.Fatal(err)
				}
				f.audit(t)
			})
		}
	})
}

// A recheck by the requester (work status, the API's GET) is a sign of
// life: a request rechecked within the bound stays pending and alive; a
// supervisor's look is not one; past the bound a recheck finds it expired,
// and no later round serves it.
func TestRecheckIsASignOfLife(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 20)
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "recheck", Lock: drivers.Lease})
		release := f.holdLease(t, task)
		id := f.logged(t, task, "sam", 1)
		as := func(user string) dispatch.GetOptions { o := fast; o.CancelAs = user; return o }

		f.age(t, id, drivers.RequestAlive-10*time.Second)
		r, err := f.e.Status(ctx, id, false, as("sam"))
		if problem.KindOf(err) != problem.Busy || r == nil || r.Status != dispatch.StatusPending {
			t.Fatalf("sam's recheck while the lease is held: %+v, %v; want pending (busy)", r, err)
		}
		if age := f.aliveAge(t, id); age > 5 {
			t.Errorf("sam's recheck left the last sign of life %d s old; want it renewed", age)
		}
		f.age(t, id, drivers.RequestAlive-10*time.Second)
		if _, err := f.e.Status(ctx, id, false, as("boss")); problem.KindOf(err) != problem.Busy {
			t.Fatalf("a supervisor's look: %v", err)
		}
		if age := f.aliveAge(t, id); age < 40 {
			t.Errorf("a supervisor's look renewed the request (%d s old): only its requester's does", age)
		}

		f.age(t, id, drivers.RequestAlive+time.Second)
		r, err = f.e.Status(ctx, id, true, as("sam"))
		if err != nil || r.Status != dispatch.StatusExpired {
			t.Fatalf("sam's recheck past the bound: %+v, %v; want expired", r, err)
		}
		release()
		if r, err := f.e.Get(ctx, task.Name, "ann", 1, fast); err != nil || len(r.Loans) != 1 {
			t.Fatalf("ann: %+v, %v", r, err)
		}
		f.wantUnserved(t, id, dispatch.StatusExpired)
		f.audit(t)
	})
}

// A caller that waits shows a sign of life on its request while it waits,
// however long the wait: the request stays alive past the bound and is
// served once the lock is free.
func TestWaiterKeepsItsRequestAlive(t *testing.T) {
	t.Cleanup(dispatch.SetAliveEvery(50 * time.Millisecond)) // after the parallel subtests
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 20)
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "waiter", Lock: drivers.Lease})
		release := f.holdLease(t, task)
		done := make(chan *dispatch.Request, 1)
		go func() {
			r, err := f.engine(t).Get(ctx, task.Name, "wai", 2, fast)
			if err != nil {
				t.Error(err)
			}
			done <- r
		}()
		var id int64
		for deadline := time.Now().Add(30 * time.Second); id == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no pending request of wai after 30 s")
			}
			if r, err := f.d.Statements().RequestPendingFor.One(ctx, f.db, engineio.TaskUserParams{TaskID: task.ID, User: "wai"}); err == nil {
				id = r.ID
			}
		}
		// Silent for almost the bound, as if it had waited that long: its
		// next sign of life comes within aliveEvery.
		f.age(t, id, drivers.RequestAlive-time.Second)
		time.Sleep(500 * time.Millisecond)
		if age := f.aliveAge(t, id); age > 5 {
			t.Errorf("the waiter's request is %d s past its last sign of life; want it renewed while it waits", age)
		}
		release()
		if r := <-done; r == nil || r.ID != id || len(r.Loans) != 2 {
			t.Fatalf("the waiter's answer: %+v", r)
		}
		f.audit(t)
	})
}

// A caller that must not share an answer (OwnRequest, `work run`) never
// serves the user's pending request of another call: it waits until that
// request is answered by whoever waits for it, then logs and serves its
// own; one whose caller is gone it waits out until it expires, unserved.
func TestOwnRequestLeavesTheOtherRequestAlone(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 40)
		ctx := context.Background()
		for _, s := range f.d.Capabilities().Strategies {
			t.Run(string(s), func(t *testing.T) {
				task := f.task(t, dispatch.TaskSpec{Name: "own-" + string(s), Lock: s})
				own := fast
				own.OwnRequest = true

				// Another call's request, alive: the lock is free, yet the
				// caller leaves it pending until its own caller serves it.
				other := f.logged(t, task, "ann", 1)
				done := make(chan *dispatch.Request, 1)
				go func() {
					r, err := f.engine(t).Get(ctx, task.Name, "ann", 2, own)
					if err != nil {
						t.Error(err)
					}
					done <- r
				}()
				time.Sleep(1500 * time.Millisecond)
				if r, err := f.e.Request(ctx, other); err != nil || r.Status != dispatch.StatusPending {
					t.Fatalf("the other call's request after 1.5 s: %+v, %v; want it left pending", r, err)
				}
				if r, err := f.e.Status(ctx, other, true, fast); err != nil || len(r.Loans) != 1 {
					t.Fatalf("the other call serving its request: %+v, %v", r, err)
				}
				r := <-done
				if r == nil || r.ID == other || r.Attached || len(r.Loans) != 2 {
					t.Fatalf("own request: %+v; want a request of its own with 2 loans", r)
				}

				// A request nobody waits for any more: expired, unserved.
				gone := f.logged(t, task, "ann", 3)
				f.age(t, gone, drivers.RequestAlive+time.Second)
				r, err := f.e.Get(ctx, task.Name, "ann", 1, own)
				if err != nil || r.ID == gone || len(r.Loans) != 1 {
					t.Fatalf("own request with an abandoned one pending: %+v, %v", r, err)
				}
				f.wantUnserved(t, gone, dispatch.StatusExpired)
				f.audit(t)
			})
		}
	})
}
