package dispatch_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/cutproxy"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"
)

// A get whose request insert cannot reach the database (the server went away
// between the task's read and the insert: seen in the server-restart fault
// test) sent nothing: its message must say that nothing was recorded and no
// request is left pending, name no request, and say how to ask again; the
// database holds no request of the caller. A lost connection after the
// insert was sent is not this case (drivers.Unreached).
func TestRequestThatNeverReachedTheDatabaseSaysNothingIsPending(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 10)
		proxy, proxied, _, _, ok := cutproxy.Through(t, dsn)
		if !ok {
			t.Skipf("%s is an embedded file: there is no server to lose", f.d.Name())
		}
		task := f.task(t, dispatch.TaskSpec{Name: "gone", Lock: drivers.Lease})
		_, db := testdb.Open(t, proxied)
		e := dispatch.New(db, f.d)
		e.SetBeforeRequestLog(func() {
			// The server is gone for this engine: its listener refuses, and
			// the pool's idle connection (the task's read) is closed.
			proxy.Cut()
			db.SetMaxIdleConns(0)
		})
		r, err := e.Get(context.Background(), task.Name, "ana", 2, fast)
		if err == nil {
			t.Fatalf("a get with the database gone succeeded: %+v", r)
		}
		if !drivers.Unreached(err) {
			t.Fatalf("the error is not a dial that failed: %v", err)
		}
		msg := err.Error()
		if problem.KindOf(err) != problem.Failure || !strings.Contains(msg, "no request is left pending") ||
			!strings.Contains(msg, "`loanq work get gone` asks again") {
			t.Errorf("%v; want a failure saying no request is left pending and how to ask again", err)
		}
		if m := regexp.MustCompile(`request (id )?\d+|work status \d+`).FindString(msg); m != "" {
			t.Errorf("the error names %q, a request that was never sent: %v", m, err)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ?", task.ID); n != 0 {
			t.Errorf("%d requests recorded, want none", n)
		}
		// The retry the message advises, on a database that answers, serves.
		next, err := f.e.Get(context.Background(), task.Name, "ana", 2, fast)
		if err != nil || next.Status != dispatch.StatusAssigned || len(next.Loans) != 2 {
			t.Fatalf("the get asked again: %+v, %v", next, err)
		}
		f.audit(t)
	})
}
